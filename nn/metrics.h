// Classification metrics on logits [B, classes] and class-index targets [B].
#pragma once

#include <cstdint>

#include "autograd/variable.h"
#include "tensor/tensor.h"

namespace tessera {
namespace nn {

// How many rows' largest logit is at the target class.
int64_t num_correct(const Tensor& logits, const Tensor& targets);
// A model's output as it comes: num_correct((*model)(b.inputs), b.targets).
inline int64_t num_correct(const Variable& logits, const Tensor& targets) {
  return num_correct(logits.data(), targets);
}
// num_correct / B (0 for an empty batch).
double accuracy(const Tensor& logits, const Tensor& targets);

}  // namespace nn
}  // namespace tessera
