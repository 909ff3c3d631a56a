// Weights alone, one call each way: a module's parameters and buffers (its state_dict) in a
// safetensors file, which other tools read too. For training progress as well (optimizer state,
// epoch, random stream), see dist/checkpoint.h.
//
//   nn::save_weights(*model, "net.safetensors");
//   nn::load_weights(*other, "net.safetensors");   // strict: names and shapes must match
//
// Loading converts precision (f16 weights into an f32 model) but not a dtype's kind: a tensor
// whose shape or kind (floating-point, integer, bool) differs from the module's is an error
// naming the file, the tensor and both shapes or dtypes.
#pragma once

#include <string>

#include "nn/module.h"

namespace tessera {
namespace nn {

void save_weights(const Module& module, const std::string& path);
void load_weights(Module& module, const std::string& path, bool strict = true);

}  // namespace nn
}  // namespace tessera
