// Device: where a tensor's bytes live, `cpu` or `cuda:N`.
#pragma once

#include <ostream>
#include <string>

namespace tessera {

enum class DeviceType : uint8_t { kCPU = 0, kCUDA = 1 };
inline constexpr int kNumDeviceTypes = 2;
inline constexpr int kMaxDevicesPerType = 16;

class Device {
 public:
  Device() = default;
  Device(DeviceType type, int index = 0);
  // Parses "cpu", "cuda", "cuda:1".
  static Device parse(const std::string& text);
  static Device cpu() { return Device(DeviceType::kCPU, 0); }
  static Device cuda(int index = 0) { return Device(DeviceType::kCUDA, index); }

  DeviceType type() const { return type_; }
  int index() const { return index_; }
  bool is_cpu() const { return type_ == DeviceType::kCPU; }
  bool is_cuda() const { return type_ == DeviceType::kCUDA; }
  std::string str() const;

  bool operator==(const Device& other) const {
    return type_ == other.type_ && index_ == other.index_;
  }
  bool operator!=(const Device& other) const { return !(*this == other); }

 private:
  DeviceType type_ = DeviceType::kCPU;
  int index_ = 0;
};

std::ostream& operator<<(std::ostream& os, const Device& device);

}  // namespace tessera
