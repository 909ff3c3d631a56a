#include "dist/local_sgd/consensus_distance.h"

#include "dist/local_sgd/flat_tensors.h"
#include "dist/reduce_scalar.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {

double squared_distance(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  TS_CHECK(a.size() == b.size(), "squared_distance: ", a.size(), " tensors against ", b.size());
  double total = 0;
  for (size_t k = 0; k < a.size(); ++k) {
    TS_CHECK(a[k].shape() == b[k].shape(), "squared_distance: tensor ", k, " has shape ",
             a[k].shape(), " against ", b[k].shape());
    total += sum(square(sub(a[k].to(kF64), b[k].to(kF64)))).item();
  }
  return total;
}

double consensus_distance(const std::vector<Tensor>& tensors, ProcessGroup& group) {
  FlatTensors mean(tensors, "consensus_distance");
  mean.pack(tensors);
  mean.all_reduce_mean(group);
  std::vector<Tensor> means;
  for (size_t i = 0; i < tensors.size(); ++i) means.push_back(mean.view(i));
  return all_reduce_scalar(squared_distance(tensors, means), group, ReduceOp::kMean);
}

}  // namespace dist
}  // namespace tessera
