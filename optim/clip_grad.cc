#include "optim/clip_grad.h"

#include <cmath>
#include <limits>

#include "autograd/grad_mode.h"
#include "tensor/ops.h"

namespace tessera {
namespace optim {

double squared_sum(const Tensor& grad) {
  NoGradGuard no_grad;
  return sum(square(grad.to(kF64))).item();
}

double grad_squared_sum(const std::vector<Variable>& params) {
  double sum_of_squares = 0;
  for (const Variable& p : params) {
    if (p.grad().defined()) sum_of_squares += squared_sum(p.grad());
  }
  return sum_of_squares;
}

double grad_norm(const std::vector<Variable>& params) { return std::sqrt(grad_squared_sum(params)); }

double clip_coefficient(double max_norm, double total) { return max_norm / (total + 1e-6); }

namespace {

void scale_grads(const std::vector<Variable>& params, double max_norm, double total) {
  const double coef = clip_coefficient(max_norm, total);
  if (coef >= 1) return;
  for (const Variable& p : params) {
    if (!p.grad().defined()) continue;
    Tensor g = p.grad();
    mul_(g, coef);
  }
}

}  // namespace

double clip_grad_norm(const std::vector<Variable>& params, double max_norm, double norm_type) {
  TS_CHECK(max_norm >= 0, "clip_grad_norm: max_norm must be >= 0, got ", max_norm);
  for (const Variable& p : params) {
    // Under ZeRO or FSDP a parameter's own gradient is local or released: clipping it would
    // silently clip nothing, or by a norm no other rank sees.
    TS_CHECK(p.grad_held_by().empty(), "clip_grad_norm: parameter '", p.name(), "' is trained by ",
             p.grad_held_by());
  }
  const bool inf = std::isinf(norm_type);
  TS_CHECK(inf || norm_type == 2.0, "clip_grad_norm: norm_type must be 2 or infinity, got ",
           norm_type);
  NoGradGuard no_grad;
  double total = 0;
  if (inf) {
    for (const Variable& p : params) {
      if (p.grad().defined()) total = std::max(total, amax(abs(p.grad())).item());
    }
  } else {
    total = grad_norm(params);
  }
  scale_grads(params, max_norm, total);
  return total;
}

double clip_grad_norm(const std::vector<Variable>& held, const std::vector<Variable>& counted,
                      double max_norm, const SquaredNormReduction& reduce) {
  TS_CHECK(max_norm >= 0, "clip_grad_norm: max_norm must be >= 0, got ", max_norm);
  NoGradGuard no_grad;
  const double local = grad_squared_sum(counted);
  const double total = std::sqrt(reduce ? reduce(local) : local);
  scale_grads(held, max_norm, total);
  return total;
}

}  // namespace optim
}  // namespace tessera
