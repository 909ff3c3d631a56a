// --strategy=zero3: dist::FullyShardedDataParallel over the world (or, with
// --collectives=hierarchical, over dist::HierarchicalGroup), the optimizer over this rank's flat
// shards cut by the parameter groups (dist::zero::GroupedShardOptimizer: a GPT's decay and
// no-decay groups); under --amp the units are gathered in the autocast dtype.
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

std::unique_ptr<Strategy> make_fully_sharded(const Config& config,
                                             std::shared_ptr<nn::Sequential> model,
                                             std::shared_ptr<dist::ProcessGroup> world,
                                             Criterion criterion, MixedPrecision& precision);

}  // namespace train
}  // namespace tessera
