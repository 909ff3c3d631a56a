// VocabParallelLMHead: a language model's output projection tied to its VocabParallelEmbedding
// (GPT-2's lm_head, logits = x wte^T), on this rank's rows of the vocabulary: Megatron-LM's
// parallel_lm_logits with parallel_output, the logits left split.
//
//                    wte_r [V/T, C] (the embedding's own slice: one weight, two uses)
//                        |
//   x [B, S, C] ─f─> x wte_r^T = logits_r [B, S, V/T]  ─> ClassParallelCrossEntropy over V classes
//
// f = copy_to_parallel_region: x is the same on every rank, but every rank's logits depend on it
// through its own rows, so dL/dx = sum_r dL/dlogits_r wte_r, f's backward all-reduce of B x S x C
// values. wte_r's gradient collects both uses: the projection's dL/dlogits_r^T x and the
// lookup's rows, each on the rank that holds those tokens.
//
// Under sequence parallelism (set_sequence_parallel) x is this rank's tokens [B, S/T, C]: it is
// all-gathered along the sequence first (Megatron-LM does the same), and dL/dx reduce-scattered
// back to the tokens in backward, in place of f's all-reduce; the logits are [B, S, V/T] as before.
//
// The logits are never gathered for the loss: ClassParallelCrossEntropy over V classes (loss())
// needs two all-reduces of B x S and 3 B x S values (Megatron-LM's vocab_parallel_cross_entropy),
// where gathering them would be B x S x V. gather_logits() all-gathers the few rows that need
// the whole distribution (sampling: the last position's).
//
// The head has no parameter of its own (named_parameters() lists the weight once, as the
// embedding's), and no state; it registers its use of the embedding's weight as a tie
// (nn::Module::register_tied_parameter), so a pipeline finds it in the module tree.
#pragma once

#include <memory>
#include <string>

#include "dist/tensor_parallel/class_parallel_cross_entropy.h"
#include "dist/tensor_parallel/vocab_parallel_embedding.h"
#include "nn/module.h"

namespace tessera {
namespace dist {
namespace tensor_parallel {

class VocabParallelLMHead : public nn::Module {
 public:
  explicit VocabParallelLMHead(std::shared_ptr<VocabParallelEmbedding> wte);

  std::string extra_repr() const override;
  // x [..., C], the same on every rank -> this rank's logits [..., V/T] (classes vocab_slice()).
  Variable forward(const Variable& x) override;

  // The cross-entropy over this head's split logits and targets [...] of V classes.
  ClassParallelCrossEntropy loss(Reduction reduction = Reduction::kMean) const;
  // Every rank's logits [..., V/T] -> [..., V], the vocabulary in order (collective).
  Tensor gather_logits(const Tensor& local) const;

  const std::shared_ptr<VocabParallelEmbedding>& embedding() const { return wte_; }
  Slice vocab_slice() const { return wte_->vocab_slice(); }
  // Sequence parallelism: x [B, S/T, C] is this rank's tokens, gathered before the projection.
  void set_sequence_parallel(bool on) { sequence_parallel_ = on; }
  bool sequence_parallel() const { return sequence_parallel_; }

 private:
  std::shared_ptr<VocabParallelEmbedding> wte_;
  bool sequence_parallel_ = false;
};

}  // namespace tensor_parallel
}  // namespace dist
}  // namespace tessera
