// Front ends of the fused optimizer updates: argument checks, then the Backend.
#include "tensor/backend.h"
#include "tensor/fused_updates.h"
#include "tensor/ops_util.h"

namespace tessera {

namespace {
void check_state(const Tensor& param, const Tensor& t, const char* op, const char* what) {
  detail::check_defined(t, op, what);
  TS_CHECK(t.shape() == param.shape() && t.dtype() == param.dtype() &&
               t.device() == param.device() && t.is_contiguous(),
           op, ": ", what, " is ", t.str(), (t.is_contiguous() ? "" : " (not contiguous)"),
           " but the parameter is ", param.str());
}
}  // namespace

void sgd_update_(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
                 const SgdUpdate& u) {
  detail::check_defined(param, "sgd_update_", "parameter");
  detail::check_floating(param, "sgd_update_");
  TS_CHECK(param.is_contiguous(), "sgd_update_: parameter must be contiguous");
  check_state(param, grad, "sgd_update_", "grad");
  if (u.momentum != 0) check_state(param, momentum_buffer, "sgd_update_", "momentum buffer");
  backend(param.device()).sgd_update(param, grad, momentum_buffer, u);
}

void adam_update_(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                  const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq, const AdamUpdate& u) {
  detail::check_defined(param, "adam_update_", "parameter");
  detail::check_floating(param, "adam_update_");
  TS_CHECK(param.is_contiguous(), "adam_update_: parameter must be contiguous");
  TS_CHECK(u.step >= 1, "adam_update_: step must be >= 1, got ", u.step);
  check_state(param, grad, "adam_update_", "grad");
  check_state(param, exp_avg, "adam_update_", "exp_avg");
  check_state(param, exp_avg_sq, "adam_update_", "exp_avg_sq");
  if (u.amsgrad) check_state(param, max_exp_avg_sq, "adam_update_", "max_exp_avg_sq");
  backend(param.device()).adam_update(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, u);
}

}  // namespace tessera
