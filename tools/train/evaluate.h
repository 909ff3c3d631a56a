// Test accuracy after an epoch. With data parallelism each replica evaluates its own shard of
// the test set and the counts are summed over one rank of each replica (the strategy's
// replica_group), so every rank gets the whole set's accuracy.
#pragma once

#include "data/data_loader.h"
#include "tools/train/context.h"

namespace tessera {
namespace train {

// Collective over the replica group. Runs the model in eval mode and leaves it in train mode.
double evaluate(const RunContext& run, const data::DataLoader& test_loader);

}  // namespace train
}  // namespace tessera
