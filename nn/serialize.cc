#include "nn/serialize.h"

#include "tensor/safetensors.h"

namespace tessera {
namespace nn {

void save_weights(const Module& module, const std::string& path) {
  save_safetensors(path, module.state_dict(), {{"format", "tessera-weights"}});
}

void load_weights(Module& module, const std::string& path, bool strict) {
  module.load_state_dict(load_safetensors(path).tensors, strict);
}

}  // namespace nn
}  // namespace tessera
