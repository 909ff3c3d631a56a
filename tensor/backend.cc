#include "tensor/backend.h"

#include "tensor/check.h"

namespace tessera {

namespace {
Backend* g_backends[kNumDeviceTypes] = {nullptr, nullptr};
}

void Backend::batch_norm_apply_relu(const Tensor& x, const Tensor& mean, const Tensor& invstd,
                                    const Tensor& weight, const Tensor& bias,
                                    const Tensor& residual, const Tensor& out) {
  batch_norm_apply(x, mean, invstd, weight, bias, out);
  // In place: each element of out is read before it is written, by the same thread.
  if (residual.defined()) binary(BinaryOp::kAdd, out, residual, out);
  unary(UnaryOp::kRelu, out, out, 0, 0);
}

void Backend::batch_norm_relu_backward(const Tensor& grad_out, const Tensor& out,
                                       const Tensor& x, const Tensor& mean, const Tensor& invstd,
                                       const Tensor& weight, bool training,
                                       const Tensor& grad_in, const Tensor& grad_weight,
                                       const Tensor& grad_bias, const Tensor& grad_residual) {
  const Tensor masked = grad_residual.defined() ? grad_residual : empty_like(grad_out);
  binary(BinaryOp::kReluBackward, grad_out, out, masked);
  batch_norm_backward(masked, x, mean, invstd, weight, training, grad_in, grad_weight, grad_bias);
}

void Backend::conv2d_backward(const Tensor& grad_out, const Tensor& input, const Tensor& weight,
                              const Conv2dParams& p, const Tensor& grad_in,
                              const Tensor& grad_weight) {
  if (grad_in.defined()) conv2d_backward_input(grad_out, weight, p, grad_in);
  if (grad_weight.defined()) conv2d_backward_weight(grad_out, input, p, grad_weight);
}

Backend& backend(DeviceType type) {
  Backend* b = g_backends[static_cast<int>(type)];
  if (b == nullptr) {
    TS_CHECK(type != DeviceType::kCUDA,
             "no CUDA backend: this binary was built without CUDA (build with --config=cuda)");
    TS_INTERNAL_ASSERT(false, "the CPU backend is not linked (depend on //tensor)");
  }
  return *b;
}

void register_backend(DeviceType type, Backend* b) { g_backends[static_cast<int>(type)] = b; }

bool backend_registered(DeviceType type) { return g_backends[static_cast<int>(type)] != nullptr; }

}  // namespace tessera
