#include "tensor/backend.h"

#include "tensor/check.h"

namespace tessera {

namespace {
Backend* g_backends[kNumDeviceTypes] = {nullptr, nullptr};
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
