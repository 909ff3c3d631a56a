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

void check_sgd(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
               const SgdUpdate& u, const char* op) {
  detail::check_defined(param, op, "parameter");
  detail::check_floating(param, op);
  TS_CHECK(param.is_contiguous(), op, ": parameter must be contiguous");
  check_state(param, grad, op, "grad");
  if (u.momentum != 0) check_state(param, momentum_buffer, op, "momentum buffer");
}

void check_adam(const AdamTensors& t, const AdamUpdate& u, const char* op) {
  detail::check_defined(t.param, op, "parameter");
  detail::check_floating(t.param, op);
  TS_CHECK(t.param.is_contiguous(), op, ": parameter must be contiguous");
  TS_CHECK(u.step >= 1, op, ": step must be >= 1, got ", u.step);
  check_state(t.param, t.grad, op, "grad");
  check_state(t.param, t.exp_avg, op, "exp_avg");
  check_state(t.param, t.exp_avg_sq, op, "exp_avg_sq");
  if (u.amsgrad) check_state(t.param, t.max_exp_avg_sq, op, "max_exp_avg_sq");
}

// Every parameter of a multi-tensor update shares the first one's dtype and device.
void check_same_kind(const Tensor& first, const Tensor& param, const char* op) {
  TS_CHECK(param.dtype() == first.dtype() && param.device() == first.device(), op,
           ": every parameter must have the first one's dtype and device (", first.str(),
           "), got ", param.str());
}

}  // namespace

void sgd_update_(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
                 const SgdUpdate& u) {
  check_sgd(param, grad, momentum_buffer, u, "sgd_update_");
  backend(param.device()).sgd_update(param, grad, momentum_buffer, u);
}

void adam_update_(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                  const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq, const AdamUpdate& u) {
  check_adam({param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq}, u, "adam_update_");
  backend(param.device()).adam_update(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, u);
}

void sgd_update_many_(const std::vector<SgdTensors>& list, const SgdUpdate& u) {
  if (list.empty()) return;
  for (const SgdTensors& t : list) {
    check_sgd(t.param, t.grad, t.momentum_buffer, u, "sgd_update_many_");
    check_same_kind(list[0].param, t.param, "sgd_update_many_");
  }
  backend(list[0].param.device()).sgd_update_many(list, u);
}

void adam_update_many_(const std::vector<AdamTensors>& list, const AdamUpdate& u) {
  if (list.empty()) return;
  for (const AdamTensors& t : list) {
    check_adam(t, u, "adam_update_many_");
    check_same_kind(list[0].param, t.param, "adam_update_many_");
  }
  backend(list[0].param.device()).adam_update_many(list, u);
}

}  // namespace tessera
