#include "dist/reduce_scalar.h"

#include "tensor/ops.h"

namespace tessera {
namespace dist {

double all_reduce_scalar(double value, ProcessGroup& group, ReduceOp op) {
  Tensor t = scalar_tensor(value, kF64);
  group.all_reduce(t, op)->wait();
  return t.item();
}

}  // namespace dist
}  // namespace tessera
