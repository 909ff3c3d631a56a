// The distributed half of dynamic loss scaling: every rank must skip the same steps.
//
// GradScaler (optim/grad_scaler.h) decides from found_inf, a flag its unscale pass sets when a
// gradient holds inf or NaN. Each rank sees only its own gradients (before DDP's average, or
// its ZeRO shard, or its pipeline stage), so the ranks can disagree: one skips, the others
// step, and the replicas drift apart for good. A MAX all-reduce of the flag makes them agree:
//
//   rank 0: found_inf 0 --\                 /--> 1: skip
//                          >-- MAX all-reduce
//   rank 1: found_inf 1 --/                 \--> 1: skip
//
// optim may not depend on dist, so the scaler takes the reduction as a function:
//   optim::GradScaler scaler(options, dist::found_inf_all_reduce(world));
// It is collective: every rank's scaler calls it once per unscale, gradients or not.
#pragma once

#include <memory>

#include "dist/process_group.h"
#include "optim/grad_scaler.h"

namespace tessera {
namespace dist {

// found_inf all-reduced with MAX over `group` (over the device's group, NCCL in a CUDA build,
// when found_inf lives on a GPU; dist/device_groups.h).
optim::FoundInfReduction found_inf_all_reduce(std::shared_ptr<ProcessGroup> group);

}  // namespace dist
}  // namespace tessera
