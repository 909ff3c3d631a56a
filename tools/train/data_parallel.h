// --strategy=single, ddp, zero1 and zero2: every rank holds the whole model and reads its own
// shard of the data. DDP wraps the model (it averages the gradients during backward, bucket by
// bucket, through --compression's hook if any); ZeRO-1/2 is the optimizer (it reduce-scatters
// them itself), so the model runs as it is. With --tensor-parallel the model's split layers hold
// this rank's slices, the ranks of a tensor-parallel group read the same shard, and DDP or
// ZeRO-1 runs over the data-parallel group (one rank of each replica).
#pragma once

#include <memory>

#include "dist/process_group.h"
#include "dist/topology.h"
#include "nn/sequential.h"
#include "tools/train/flags.h"
#include "tools/train/precision.h"
#include "tools/train/strategy.h"

namespace tessera {
namespace train {

// world is null for --strategy=single; topology is null unless --tensor-parallel.
std::unique_ptr<Strategy> make_data_parallel(const Config& config,
                                             std::shared_ptr<nn::Sequential> model,
                                             std::shared_ptr<dist::ProcessGroup> world,
                                             const dist::Topology* topology, Criterion criterion,
                                             MixedPrecision& precision);

}  // namespace train
}  // namespace tessera
