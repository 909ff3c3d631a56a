#include "tensor/accelerator.h"

#include <atomic>

#include "tensor/backend.h"

namespace tessera {

namespace {
std::atomic<bool> g_allow_tf32{false};
}

int device_count(DeviceType type) {
  if (!backend_registered(type)) return 0;
  return backend(type).device_count();
}

bool cuda_is_available() { return device_count(DeviceType::kCUDA) > 0; }

std::string cuda_unavailable_reason() {
  if (!backend_registered(DeviceType::kCUDA)) {
    return "this binary was built without CUDA (build with --config=cuda)";
  }
  return backend(DeviceType::kCUDA).unavailable_reason();
}

void synchronize(Device device) { backend(device).synchronize(device.index()); }

void set_allow_tf32(bool allow) { g_allow_tf32.store(allow); }
bool allow_tf32() { return g_allow_tf32.load(); }

}  // namespace tessera
