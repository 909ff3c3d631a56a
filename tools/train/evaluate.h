// Evaluation after an epoch: an image model's test accuracy, a language model's validation loss
// (the mean cross-entropy per token) and perplexity (its exp). With data parallelism each
// replica evaluates its own shard of the test set (or of the validation windows) and the sums
// are added over one rank of each replica (the strategy's replica_group), so every rank gets
// the whole set's figures.
#pragma once

#include <cmath>

#include "data/data_loader.h"
#include "tools/train/context.h"

namespace tessera {
namespace train {

struct Evaluation {
  double accuracy = 0;  // an image model's
  double loss = 0;      // a language model's mean token loss (nats)
  double perplexity() const { return std::exp(loss); }
};

// Collective over the replica group (and under --tensor-parallel the tensor-parallel group, whose
// ranks read the same batches). Runs the model in eval mode and leaves it in train mode.
Evaluation evaluate(const RunContext& run, const data::DataLoader& test_loader);

}  // namespace train
}  // namespace tessera
