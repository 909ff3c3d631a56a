// Front end of non_finite_check_and_unscale_: checks, then one backend call per dtype (a
// backend kernel sees gradients of one dtype, so it can run them as one multi-tensor launch).
#include <map>

#include "tensor/backend.h"
#include "tensor/ops_util.h"
#include "tensor/unscale.h"

namespace tessera {

void non_finite_check_and_unscale_(const std::vector<Tensor>& grads, const Tensor& found_inf,
                                   double inv_scale) {
  const char* op = "non_finite_check_and_unscale_";
  detail::check_defined(found_inf, op, "found_inf");
  TS_CHECK(found_inf.dtype() == kF32 && found_inf.numel() == 1 && found_inf.is_contiguous(), op,
           ": found_inf must be one contiguous f32 element, got ", found_inf.str());
  std::map<DType, std::vector<Tensor>> by_dtype;
  // Gradients that are not contiguous are unscaled in a contiguous copy, then written back.
  std::vector<std::pair<Tensor, Tensor>> write_back;
  for (size_t i = 0; i < grads.size(); ++i) {
    const Tensor& g = grads[i];
    detail::check_defined(g, op, "gradient");
    TS_CHECK(is_floating(g.dtype()), op, ": gradient ", i, " is ", g.dtype(),
             ", expected a floating-point tensor");
    TS_CHECK(g.device() == found_inf.device(), op, ": gradient ", i, " is on ", g.device(),
             " but found_inf is on ", found_inf.device());
    if (g.numel() == 0) continue;
    if (g.is_contiguous()) {
      by_dtype[g.dtype()].push_back(g);
    } else {
      Tensor c = g.contiguous();
      by_dtype[g.dtype()].push_back(c);
      write_back.push_back({g, c});
    }
  }
  Backend& be = backend(found_inf.device());
  for (const auto& [dtype, list] : by_dtype) be.non_finite_check_and_unscale(list, found_inf, inv_scale);
  for (auto& [g, c] : write_back) Tensor(g).copy_(c);
}

}  // namespace tessera
