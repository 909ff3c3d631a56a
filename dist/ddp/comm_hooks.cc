#include "dist/ddp/comm_hooks.h"

#include "tensor/ops.h"

namespace tessera {
namespace dist {

std::shared_ptr<Work> allreduce_hook(ProcessGroup& group, const Tensor& bucket) {
  return group.all_reduce(bucket, ReduceOp::kSum);
}

std::shared_ptr<Work> fp16_compress_hook(ProcessGroup& group, const Tensor& bucket) {
  // Pre-divide so the f16 sum stays in range; the result is scaled back after.
  const double n = static_cast<double>(group.size());
  const Tensor compressed = div(bucket, n).to(kF16);
  std::shared_ptr<Work> inner = group.all_reduce(compressed, ReduceOp::kSum);
  return std::make_shared<ChainedWork>(inner, [bucket, compressed, n] {
    Tensor(bucket).copy_(mul(compressed.to(bucket.dtype()), n));
  });
}

}  // namespace dist
}  // namespace tessera
