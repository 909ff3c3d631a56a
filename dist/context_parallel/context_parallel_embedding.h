// ContextParallelEmbedding: the GPT's embedding (models/gpt.cc's GPTEmbedding, wte[idx] +
// wpe[positions]) for a rank that holds some chunks of each sequence: idx [B, T/C] are the
// tokens at the rank's positions (sequence_split.h's rank_positions for T = C x T/C), and those
// positions, not 0..T/C-1, are the rows of wpe it adds:
//
//   head-tail, C = 2, T = 8:  rank 0 holds positions 0 1 | 6 7, rank 1 holds 2 3 | 4 5
//
// wte and wpe are the replaced embedding's own children under the same names (so
// embed.wte.weight, the weight lm_head is tied to, stays the same Variable), found by name at
// every call so that a vocabulary-parallel wte composes, and so does a sequence-parallel wpe
// (dist/tensor_parallel's SequenceParallelPositionEmbedding): given the rank's positions, it
// keeps its tensor-parallel rank's contiguous share of them, the same share of the rank's tokens
// the vocabulary-parallel wte's reduce-scatter keeps. Under context x sequence parallelism a
// rank thus holds T/(C x TP) tokens between the attention and MLP sublayers.
#pragma once

#include <memory>

#include "dist/context_parallel/sequence_split.h"
#include "dist/process_group.h"
#include "nn/module.h"

namespace tessera {
namespace dist {
namespace context_parallel {

class ContextParallelEmbedding : public nn::Module {
 public:
  // `embedding` has children "wte" and "wpe" (wpe holds the context's rows as its "weight").
  ContextParallelEmbedding(const nn::Module& embedding, std::shared_ptr<ProcessGroup> group,
                           SequenceSplit split);
  std::string type_name() const override { return "ContextParallelEmbedding"; }
  std::string extra_repr() const override;
  Variable forward(const Variable& idx) override;

 private:
  nn::Module& child(const char* name) const;

  int64_t context_;  // wpe's rows
  std::shared_ptr<ProcessGroup> group_;
  SequenceSplit split_;
};

}  // namespace context_parallel
}  // namespace dist
}  // namespace tessera
