// Weights alone, one call each way: a module's parameters and buffers (its state_dict) in a
// safetensors file, which other tools read too. For training progress as well (optimizer state,
// epoch, random stream), see dist/checkpoint.h.
//
//   nn::save_weights(*model, "net.safetensors");
//   nn::load_weights(*other, "net.safetensors");   // strict: names and shapes must match
#pragma once

#include <string>

#include "nn/module.h"

namespace tessera {
namespace nn {

void save_weights(const Module& module, const std::string& path);
void load_weights(Module& module, const std::string& path, bool strict = true);

}  // namespace nn
}  // namespace tessera
