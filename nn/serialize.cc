#include "nn/serialize.h"

#include "tensor/safetensors.h"

namespace tessera {
namespace nn {

void save_weights(const Module& module, const std::string& path) {
  save_safetensors(path, module.state_dict(), {{"format", "tessera-weights"}});
}

void load_weights(Module& module, const std::string& path, bool strict) {
  const StateDict tensors = load_safetensors(path).tensors;  // its errors name the file
  try {
    module.load_state_dict(tensors, strict);
  } catch (const Error& e) {
    TS_FAIL("load_weights: '", path, "': ", e.message());
  }
}

}  // namespace nn
}  // namespace tessera
