#include "pipeline/tied_gradients.h"

#include <algorithm>

#include "dist/zero/zero_optimizer.h"
#include "tensor/check.h"
#include "tensor/ops.h"

namespace tessera {
namespace pipeline {
namespace {

// `tensors` laid end to end in one flat buffer (their dtype), and cut back into them.
Tensor flatten(const std::vector<Tensor>& tensors) {
  std::vector<Tensor> flat;
  for (const Tensor& t : tensors) flat.push_back(t.contiguous().view({t.numel()}));
  return cat(flat, 0);
}

void unflatten(const Tensor& flat, std::vector<Tensor>& tensors) {
  int64_t at = 0;
  for (Tensor& t : tensors) {
    t = flat.narrow(0, at, t.numel()).view(t.shape());
    at += t.numel();
  }
}

// Where each held parameter's elements sit in the ZeRO optimizer's flat vector.
std::vector<dist::zero::Range> flat_ranges(const std::vector<const TiedParameter*>& held,
                                           const dist::ZeroRedundancyOptimizer& zero) {
  std::vector<dist::zero::Range> out;
  const std::vector<Variable>& params = zero.params();
  for (const TiedParameter* t : held) {
    const auto it = std::find_if(params.begin(), params.end(),
                                 [&](const Variable& p) { return p.is_same(t->variable); });
    TS_CHECK(it != params.end(), "Pipe: the ZeRO optimizer does not step tied parameter ", t->name);
    out.push_back(zero.layout().ranges.at(it - params.begin()));
  }
  return out;
}

// ZeRO-2: each held parameter's averaged gradient, from the replicas' shards.
std::vector<Tensor> gradients_from_shards(const std::vector<const TiedParameter*>& held,
                                          const std::vector<dist::zero::Range>& ranges,
                                          dist::ZeroRedundancyOptimizer& zero) {
  const Tensor& shard_grad = zero.shard_gradient();
  TS_CHECK(shard_grad.defined(), "Pipe: ZeRO-2 holds no gradient after the batch");
  const dist::zero::Range shard = zero.shards()[zero.group().rank()];
  std::vector<Tensor> grads;
  for (size_t k = 0; k < held.size(); ++k) {
    Tensor g = zeros(held[k]->variable.shape(), TensorOptions(shard_grad.dtype()).device(shard_grad.device()));
    const dist::zero::Range mine = dist::zero::intersect(ranges[k], shard);
    if (!mine.empty()) {
      Tensor dst = g.view({g.numel()}).narrow(0, mine.begin - ranges[k].begin, mine.size());
      dst.copy_(shard_grad.narrow(0, mine.begin - shard.begin, mine.size()));
    }
    grads.push_back(g);
  }
  Tensor flat = flatten(grads);
  zero.group().all_reduce(flat)->wait();  // every element from one shard: a sum assembles it
  unflatten(flat, grads);
  return grads;
}

// ZeRO-2: this rank's part of each summed gradient back into its shard.
void write_into_shard(const std::vector<Tensor>& grads, const std::vector<dist::zero::Range>& ranges,
                      dist::ZeroRedundancyOptimizer& zero) {
  const dist::zero::Range shard = zero.shards()[zero.group().rank()];
  for (size_t k = 0; k < grads.size(); ++k) {
    const dist::zero::Range mine = dist::zero::intersect(ranges[k], shard);
    if (mine.empty()) continue;
    Tensor dst = zero.shard_gradient().narrow(0, mine.begin - shard.begin, mine.size());
    dst.copy_(grads[k].contiguous().view({grads[k].numel()}).narrow(0, mine.begin - ranges[k].begin,
                                                                    mine.size()));
  }
}

}  // namespace

std::string sum_tied_gradients(const std::vector<TiedParameter>& tied, dist::ProcessGroup& pipeline,
                               dist::ZeroRedundancyOptimizer* zero) {
  std::vector<const TiedParameter*> held;
  for (const TiedParameter& t : tied) {
    if (t.held_by(pipeline.rank())) held.push_back(&t);
  }
  if (held.empty()) return "";

  if (zero != nullptr && zero->stage() == 2) {
    const std::vector<dist::zero::Range> ranges = flat_ranges(held, *zero);
    std::vector<Tensor> grads = gradients_from_shards(held, ranges, *zero);
    sum_over_holders(tied, grads, pipeline);
    write_into_shard(grads, ranges, *zero);
    return "";
  }

  std::string problem;
  std::vector<Tensor> grads;
  for (const TiedParameter* t : held) {
    const Variable& p = t->variable;
    if (zero == nullptr && !p.grad_held_by().empty() && problem.empty()) {
      problem = "Pipe: the gradient of tied parameter " + t->name + " is reduced by " +
                p.grad_held_by() + "; give that optimizer to the Pipe (pipe.use_zero_optimizer) "
                "so that train_step sums the copies' gradients where it keeps them";
    }
    grads.push_back(p.grad().defined() ? p.grad() : zeros_like(p.data()));
  }
  if (zero != nullptr) {  // ZeRO-1: the replicas' average first, in a buffer of their own
    Tensor flat = flatten(grads);
    zero->group().all_reduce(flat, dist::ReduceOp::kMean)->wait();
    unflatten(flat, grads);
  }
  sum_over_holders(tied, grads, pipeline);
  for (size_t k = 0; k < held.size(); ++k) held[k]->variable.set_grad(grads[k].contiguous());
  return problem;
}

}  // namespace pipeline
}  // namespace tessera
