// A checkpoint whose next step has a finite loss but gradients that overflow f32: what the NaN
// guard's gradient-norm check exists for (a loss check alone lets the optimizer step on them).
#pragma once

#include <string>

#include "tensor/safetensors.h"
#include "tensor/tensor.h"

namespace tessera {
namespace testing {

// Rewrites the --model=mlp checkpoint at `path` (Flatten, fc1 784->256, ReLU, fc2 256->10) so
// that forward stays finite while backward overflows. fc1 gives every hidden unit 2e-38
// whatever the image (weights 0, bias 2e-38: positive, so ReLU passes its gradient), and fc2
// weighs them +3e38 into class 0 and -3e38 into the others: logits +-1536, a loss near 3072.
// Backward, an image of a class other than 0 sends 3e38 * 2/64 to each hidden unit (its
// probability of class 0 is 1, where it should be 0), and fc1's bias gradient sums those of
// the batch's 64 images: past f32's 3.4e38 once 37 of them are not of class 0, so inf.
inline void make_gradients_overflow(const std::string& path) {
  SafetensorsFile file = load_safetensors(path);
  // Tensors are handles: filling these fills the loaded state in place.
  Tensor fc1_weight = file.tensors.at("model.fc1.weight");
  Tensor fc1_bias = file.tensors.at("model.fc1.bias");
  Tensor fc2_weight = file.tensors.at("model.fc2.weight");
  Tensor fc2_bias = file.tensors.at("model.fc2.bias");
  fc1_weight.fill_(0.0);
  fc1_bias.fill_(2e-38);
  fc2_weight.fill_(-3e38);
  fc2_weight.narrow(0, 0, 1).fill_(3e38);
  fc2_bias.fill_(0.0);
  save_safetensors(path, file.tensors, file.metadata);
}

}  // namespace testing
}  // namespace tessera
