#include "nn/metrics.h"

#include "tensor/ops.h"

namespace tessera {
namespace nn {

int64_t num_correct(const Tensor& logits, const Tensor& targets) {
  TS_CHECK(logits.dim() == 2 && targets.dim() == 1 && logits.size(0) == targets.size(0),
           "accuracy: expected logits [B, classes] and targets [B], got ", logits.shape(), " and ",
           targets.shape());
  if (targets.numel() == 0) return 0;
  return static_cast<int64_t>(sum(eq(argmax(logits, 1), targets.to(kI64))).item());
}

double accuracy(const Tensor& logits, const Tensor& targets) {
  const int64_t n = targets.dim() == 1 ? targets.size(0) : 0;
  const int64_t correct = num_correct(logits, targets);
  return n > 0 ? static_cast<double>(correct) / n : 0.0;
}

}  // namespace nn
}  // namespace tessera
