// SequenceParallelPositionEmbedding: a learned position embedding (GPT-2's wpe) under sequence
// parallelism, where the token embedding's output is this rank's S/T tokens [B, S/T, C]
// (VocabParallelEmbedding's reduce-scatter): it returns the rows of those positions, [1, S/T, C],
// which broadcast over the batch in the GPT's wte(idx) + wpe(positions).
//
//   positions 0..S-1 ─> wpe (whole, every rank) ─> [1, S, C] ─scatter_to_sequence_parallel_region─> [1, S/T, C]
//
// The rows are added on the rank's shard, after the reduce-scatter, not before it: the token
// embedding's partial lookups are summed over the ranks, so wpe added before would have to be
// added on one rank only (or 1/T of it on each); after, every rank adds its own positions, and
// the model's code (wte(idx) + wpe(positions)) stays as it is. Every rank looks up all S
// positions (S x C values, as under plain tensor parallelism) and keeps its own, and the
// scatter's backward all-gathers the rows' gradients, so wpe's gradient is whole and the same on
// every rank (S x C values gathered, no all-reduce of the whole table) and it is not one of
// sequence_parallel_parameters.
//
// It holds the embedding's weight under the same name ("weight", [context, C]), so state_dict()
// is the plain model's.
#pragma once

#include <memory>
#include <string>

#include "dist/process_group.h"
#include "nn/embedding.h"

namespace tessera {
namespace dist {
namespace tensor_parallel {

class SequenceParallelPositionEmbedding : public nn::Module {
 public:
  // `full`'s weight (its data shared, not copied) over `group`.
  SequenceParallelPositionEmbedding(const nn::Embedding& full, std::shared_ptr<ProcessGroup> group);

  std::string extra_repr() const override;
  // positions [S] (i64, the same on every rank, S divisible by T) -> [1, S/T, C]: the rows of
  // this rank's positions.
  Variable forward(const Variable& positions) override;

  const Variable& weight() const { return weight_; }

 private:
  std::shared_ptr<ProcessGroup> group_;
  Variable weight_;
};

}  // namespace tensor_parallel
}  // namespace dist
}  // namespace tessera
