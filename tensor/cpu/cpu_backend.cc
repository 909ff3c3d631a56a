#include "tensor/cpu/cpu_backend.h"

#include "tensor/cpu/gemm_onednn.h"

namespace tessera {
namespace cpu {

// bf16: oneDNN's matmul and convolutions where the CPU has AVX-512 BF16 or AMX (gemm_onednn.h).
// f16: never; its products run the f32 kernels on widened operands (conv.cc, gemm.cc).
bool CpuBackend::computes_natively(DType low_precision) {
  return low_precision == kBF16 && onednn_bf16_available();
}

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
