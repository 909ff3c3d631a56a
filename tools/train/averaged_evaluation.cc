#include "tools/train/averaged_evaluation.h"

#include "autograd/grad_mode.h"
#include "dist/reduce_scalar.h"
#include "tensor/ops.h"

namespace tessera {
namespace train {

double AveragedEvaluation::average(nn::Module& model, dist::ProcessGroup& group) {
  NoGradGuard no_grad;
  restore(model);
  double squares = 0;
  for (const auto& [name, t] : model.state_dict()) {
    if (!is_floating(t.dtype())) continue;
    own_.push_back(t.clone());
    Tensor mean = t.clone();
    group.all_reduce(mean, dist::ReduceOp::kMean)->wait();
    squares += sum(square(sub(t, mean).to(kF64))).item();
    Tensor(t).copy_(mean);
  }
  return dist::all_reduce_scalar(squares, group, dist::ReduceOp::kMean);
}

void AveragedEvaluation::restore(nn::Module& model) {
  if (own_.empty()) return;
  NoGradGuard no_grad;
  size_t k = 0;
  for (const auto& [name, t] : model.state_dict()) {
    if (is_floating(t.dtype())) Tensor(t).copy_(own_[k++]);
  }
  own_.clear();
}

StateDict AveragedEvaluation::own_state(const nn::Module& model) const {
  StateDict out;
  size_t k = 0;
  for (const auto& [name, t] : model.state_dict()) {
    // average() kept the floating-point tensors it replaced, in this order.
    const bool averaged = !own_.empty() && is_floating(t.dtype());
    out.set(name, averaged ? own_[k++].clone() : t.clone());
  }
  return out;
}

}  // namespace train
}  // namespace tessera
