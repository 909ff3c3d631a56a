#include "tensor/cpu/cpu_backend.h"

namespace tessera {
namespace cpu {
namespace {

// Registers the CPU backend when the program starts (this library is alwayslink).
struct Registrar {
  Registrar() {
    static CpuBackend backend;
    register_backend(DeviceType::kCPU, &backend);
  }
} registrar;

}  // namespace
}  // namespace cpu
}  // namespace tessera
