// Fused optimizer updates: one pass over a parameter, its gradient and its state, in place.
// The arithmetic is PyTorch's (torch.optim.SGD / Adam / AdamW, single-tensor path), so a step
// here and a step there agree to rounding. All tensors are contiguous, of one floating dtype,
// on one device.
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/tensor.h"
#include "tensor/update_params.h"

namespace tessera {

void sgd_update_(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
                 const SgdUpdate& u);

void adam_update_(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                  const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq, const AdamUpdate& u);

// Multi-tensor forms: the same update applied to many parameters (one dtype, one device) at
// once. The CUDA backend runs them as a few launches over all the tensors together, instead of
// one small launch per parameter; the CPU runs them one by one.
struct SgdTensors {
  Tensor param, grad, momentum_buffer;
};
void sgd_update_many_(const std::vector<SgdTensors>& list, const SgdUpdate& u);

struct AdamTensors {
  Tensor param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq;
};
void adam_update_many_(const std::vector<AdamTensors>& list, const AdamUpdate& u);

}  // namespace tessera
