// Fused optimizer updates: one pass over a parameter, its gradient and its state, in place.
// The arithmetic is PyTorch's (torch.optim.SGD / Adam / AdamW, single-tensor path), so a step
// here and a step there agree to rounding. All tensors are contiguous, of one floating dtype,
// on one device.
#pragma once

#include <cstdint>

#include "tensor/tensor.h"
#include "tensor/update_params.h"

namespace tessera {

void sgd_update_(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
                 const SgdUpdate& u);

void adam_update_(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                  const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq, const AdamUpdate& u);

}  // namespace tessera
