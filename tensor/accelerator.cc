#include "tensor/accelerator.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "tensor/backend.h"
#include "tensor/check.h"

namespace tessera {

namespace {
std::atomic<bool> g_allow_tf32{false};

std::atomic<bool>& allow_winograd_flag() {
  static std::atomic<bool> flag{[] {
    const char* setting = std::getenv("TESSERA_CONV_WINOGRAD");
    return setting == nullptr || std::strcmp(setting, "off") != 0;
  }()};
  return flag;
}

std::atomic<bool>& allow_preferred_layout_flag() {
  static std::atomic<bool> flag{[] {
    const char* setting = std::getenv("TESSERA_PREFERRED_LAYOUT");
    return setting == nullptr || std::strcmp(setting, "off") != 0;
  }()};
  return flag;
}
}  // namespace

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

bool computes_natively(Device device, DType low_precision) {
  TS_CHECK(is_half(low_precision),
           "computes_natively: expected f16 or bf16, got ", low_precision);
  return backend(device).computes_natively(low_precision);
}

std::string low_precision_advice(Device device, DType low_precision) {
  if (computes_natively(device, low_precision)) return "";
  const bool bf16_native = computes_natively(device, kBF16);
  std::string text = std::string(low_precision == kF16 ? "fp16" : "bf16") + " autocast on " +
                     device.str() + ": this CPU has no native " +
                     (low_precision == kF16 ? "fp16" : "bf16") +
                     " arithmetic, so matrix products and convolutions widen their operands and "
                     "compute in f32; it saves activation memory but not time (a step costs "
                     "about what f32 does). ";
  text += bf16_native ? "bf16 autocast is computed natively here and is faster; choose it."
                      : "For speed, choose f32 on this CPU.";
  return text;
}

void set_allow_tf32(bool allow) { g_allow_tf32.store(allow); }
bool allow_tf32() { return g_allow_tf32.load(); }

void set_allow_winograd(bool allow) { allow_winograd_flag().store(allow); }
bool allow_winograd() { return allow_winograd_flag().load(); }
bool winograd_available(Device device) { return backend(device).winograd_available(); }

void set_allow_preferred_layout(bool allow) { allow_preferred_layout_flag().store(allow); }
bool allow_preferred_layout() { return allow_preferred_layout_flag().load(); }

}  // namespace tessera
