#include "tensor/accelerator.h"

#include <atomic>

#include "tensor/backend.h"
#include "tensor/check.h"

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

void check_device_exists(Device device) {
  const int count = device_count(device.type());
  TS_CHECK(count > 0, "cannot use ", device, ": ", cuda_unavailable_reason());
  TS_CHECK(device.index() >= 0 && device.index() < count, "cannot use ", device, ": only ", count,
           " device(s) of its type are visible");
}

void synchronize(Device device) { backend(device).synchronize(device.index()); }

void set_allow_tf32(bool allow) { g_allow_tf32.store(allow); }
bool allow_tf32() { return g_allow_tf32.load(); }

}  // namespace tessera
