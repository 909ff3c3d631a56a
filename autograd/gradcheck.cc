#include "autograd/gradcheck.h"

#include <cmath>
#include <sstream>

#include "autograd/grad_mode.h"
#include "tensor/ops.h"

namespace tessera {

namespace {

// Offsets (in elements, from the tensor's first element) of every element in row-major order.
std::vector<int64_t> element_offsets(const Tensor& t) {
  std::vector<int64_t> offsets;
  offsets.reserve(t.numel());
  Shape index(t.dim(), 0);
  for (int64_t k = 0; k < t.numel(); ++k) {
    int64_t off = 0;
    for (int64_t d = 0; d < t.dim(); ++d) off += index[d] * t.stride(d);
    offsets.push_back(off);
    for (int64_t d = t.dim() - 1; d >= 0; --d) {
      if (++index[d] < t.size(d)) break;
      index[d] = 0;
    }
  }
  return offsets;
}

}  // namespace

GradcheckResult gradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& options) {
  std::vector<Variable> vars;
  for (const Tensor& t : inputs) {
    TS_CHECK(t.dtype() == kF64, "gradcheck: inputs should be f64, got ", t.dtype());
    vars.emplace_back(t, true);
  }
  Variable out = fn(vars);
  Generator gen(options.seed + 1);
  const Tensor r = randn(out.shape(), out.data().options(), &gen);
  out.backward(r);

  auto projected = [&]() {
    NoGradGuard no_grad;
    return sum(mul(fn(vars).data(), r)).item();
  };

  GradcheckResult result;
  for (size_t i = 0; i < vars.size(); ++i) {
    const Tensor& x = vars[i].data();
    const Tensor analytic = vars[i].grad().defined() ? vars[i].grad() : zeros_like(x);
    const std::vector<double> ana = analytic.contiguous().to_vector<double>();
    double* base = x.data<double>();
    const std::vector<int64_t> offsets = element_offsets(x);
    for (size_t j = 0; j < offsets.size(); ++j) {
      double& value = base[offsets[j]];
      const double saved = value;
      value = saved + options.eps;
      const double plus = projected();
      value = saved - options.eps;
      const double minus = projected();
      value = saved;
      const double numeric = (plus - minus) / (2 * options.eps);
      const double err = std::fabs(numeric - ana[j]);
      result.max_abs_error = std::max(result.max_abs_error, err);
      if (result.ok && !(err <= options.atol + options.rtol * std::fabs(numeric))) {
        std::ostringstream msg;
        msg << "gradcheck: input " << i << " (shape " << shape_str(x.shape()) << ") element " << j
            << ": numerical " << numeric << " vs analytical " << ana[j];
        result.ok = false;
        result.message = msg.str();
      }
    }
  }
  return result;
}

}  // namespace tessera
