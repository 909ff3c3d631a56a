// --strategy=pipeline: K stages x N/K data-parallel replicas (dist::Topology, or the given P x T
// x D layout under --tensor-parallel), each rank's stage run by pipeline::Pipe over its
// micro-batches with --pipeline-schedule, its replicas averaged by --dp-strategy (DDP, ZeRO-1 or
// ZeRO-2). The final JSON adds "pipeline" (stages, micro-batches as run, bubble, idle per rank).
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

// `topology`: with --tensor-parallel, the layout the model's layers were split over; otherwise
// null. Throws FlagError for options the pipeline refuses (the same on every rank).
std::unique_ptr<Strategy> make_pipelined(const Config& config, std::shared_ptr<nn::Sequential> model,
                                         std::shared_ptr<dist::ProcessGroup> world,
                                         const dist::Topology* topology, Criterion criterion,
                                         MixedPrecision& precision, Device device);

}  // namespace train
}  // namespace tessera
