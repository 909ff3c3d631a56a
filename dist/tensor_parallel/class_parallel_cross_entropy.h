// Class-parallel softmax cross-entropy: the loss of logits split by class over the T ranks of a
// tensor-parallel group (the output of a ColumnParallelLinear head), computed without ever
// gathering the logits: per rank, memory and work scale with C / T, not C.
//
// Rank r holds x[:, c] for its classes c in [s_r, s_r + C_r). For each row, with m the row's
// maximum over all C classes:
//
//   log p_y = (x_y - m) - log S,     S = sum_c exp(x_c - m)
//
// m, S and x_y each need every rank's classes, so they are reduced over the group:
//   1. m   = all-reduce(max) of the local row maxima                   N floats
//   2. [S, x_y - m, sum_c (x_c - m)] = all-reduce(sum) of local parts  3N floats
//      (x_y - m is non-zero only on the rank that holds the target class y)
//
// With label smoothing eps, the target distribution is q = (1 - eps) one_hot(y) + eps / C and
//   loss = -sum_c q_c log p_c = (1 - eps)(log S - (x_y - m)) + eps (log S - sum_c (x_c - m) / C)
// Its gradient with respect to the local logits is local: p - q on this rank's classes, with
// p = exp(x - m) / S. So the backward needs no communication at all; the gradient reaches the
// ColumnParallelLinear below, whose copy_to_parallel_region sums the ranks' dL/dX.
//
// argmax (for accuracy) is reduced the same way: the best local (value, class), then the
// largest value over the group, ties going to the smallest class as in a plain argmax.
//
// A language model's logits split by vocabulary are the same thing with one row per token: logits
// [B, S, V/T] against targets [B, S] are N = B x S rows of V classes (Megatron-LM's
// vocab_parallel_cross_entropy; the GPT's head, vocab_parallel_lm_head.h). Any leading shape is
// taken so, the logits [..., C_r] and the targets [...].
#pragma once

#include <memory>

#include "autograd/functions.h"
#include "dist/process_group.h"
#include "dist/tensor_parallel/column_parallel_linear.h"
#include "dist/tensor_parallel/slices.h"

namespace tessera {
namespace dist {
namespace tensor_parallel {

class ClassParallelCrossEntropy {
 public:
  // `classes` is this rank's slice of num_classes (ColumnParallelLinear::output_slice()).
  ClassParallelCrossEntropy(std::shared_ptr<ProcessGroup> group, Slice classes,
                            int64_t num_classes, Reduction reduction = Reduction::kMean,
                            double label_smoothing = 0.0);
  // The loss over `head`'s split logits: its group, its slice of its out_features() classes
  // (a head that gathers its output is an error: its logits are not split).
  explicit ClassParallelCrossEntropy(const ColumnParallelLinear& head,
                                     Reduction reduction = Reduction::kMean,
                                     double label_smoothing = 0.0);

  // logits [..., classes.length] (this rank's classes: [N, C_r], or a language model's
  // [B, S, V_r]), target [...] of class indices in [0, num_classes), the same on every rank.
  // Reduction::kNone gives the loss of each row in the target's shape.
  Variable operator()(const Variable& logits, const Tensor& target) const;

  // The predicted class of each row, [...] i64, over all num_classes (collective).
  Tensor argmax(const Tensor& logits) const;
  Tensor argmax(const Variable& logits) const { return argmax(logits.data()); }
  int64_t num_correct(const Tensor& logits, const Tensor& target) const;
  int64_t num_correct(const Variable& logits, const Tensor& target) const {
    return num_correct(logits.data(), target);
  }

  Slice classes() const { return classes_; }
  int64_t num_classes() const { return num_classes_; }

 private:
  void check(const Tensor& logits, const Tensor* target, const char* op) const;

  std::shared_ptr<ProcessGroup> group_;
  Slice classes_;
  int64_t num_classes_;
  Reduction reduction_;
  double label_smoothing_;
};

}  // namespace tensor_parallel
}  // namespace dist
}  // namespace tessera
