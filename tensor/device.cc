#include "tensor/device.h"

#include "tensor/check.h"

namespace tessera {

Device::Device(DeviceType type, int index) : type_(type), index_(index) {
  TS_CHECK(index >= 0 && index < kMaxDevicesPerType, "Device: index ", index,
           " out of range [0, ", kMaxDevicesPerType, ")");
  TS_CHECK(type != DeviceType::kCPU || index == 0, "Device: cpu has only index 0, got ", index);
}

Device Device::parse(const std::string& text) {
  if (text == "cpu") return cpu();
  if (text == "cuda") return cuda(0);
  if (text.rfind("cuda:", 0) == 0) {
    const std::string digits = text.substr(5);
    TS_CHECK(!digits.empty() && digits.find_first_not_of("0123456789") == std::string::npos,
             "Device::parse: bad device index in '", text, "'");
    return cuda(std::stoi(digits));
  }
  TS_FAIL("Device::parse: unknown device '", text, "' (expected cpu, cuda or cuda:N)");
}

std::string Device::str() const {
  return is_cpu() ? "cpu" : "cuda:" + std::to_string(index_);
}

std::ostream& operator<<(std::ostream& os, const Device& device) { return os << device.str(); }

}  // namespace tessera
