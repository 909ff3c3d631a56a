#include "tensor/cpu/cpu_backend.h"

#include "tensor/cpu/conv_onednn.h"
#include "tensor/cpu/gemm_onednn.h"

namespace tessera {
namespace cpu {

// bf16: oneDNN's matmul and convolutions where the CPU has AVX-512 BF16 or AMX (gemm_onednn.h).
// f16: never; its products run the f32 kernels on widened operands (conv.cc, gemm.cc).
bool CpuBackend::computes_natively(DType low_precision) {
  return low_precision == kBF16 && onednn_bf16_available();
}

bool CpuBackend::winograd_available() { return onednn_winograd_available(); }

// Convolutions: bf16 where oneDNN runs them (on CPUs with AMX its primitives read and write NHWC,
// so channels-last activations need no reorder), and f32, whose channels-last convolutions all run
// oneDNN's primitives: the direct ones on the NHWC tensors as they are, Winograd's reordered into
// nChw16c (tessera's own f32 kernels are NCHW; conv.cc). Batch norm and max pooling: every floating
// dtype (batch_norm_channels_last.cc, pool.cc).
bool CpuBackend::channels_last(ChannelsLastKernel kernel, DType dtype) {
  if (kernel == ChannelsLastKernel::kConv2d) {
    return dtype == kF32 || (dtype == kBF16 && onednn_bf16_available());
  }
  return is_floating(dtype);
}

// bf16 convolutions where oneDNN's primitives pick NHWC (AMX): an NCHW activation costs a
// transpose in and out per call (transpose16.h), about a sixth of ResNet-50's bf16 step.
bool CpuBackend::prefers_channels_last(ChannelsLastKernel kernel, DType dtype) {
  return kernel == ChannelsLastKernel::kConv2d && dtype == kBF16 && onednn_bf16_prefers_nhwc();
}

// f32 on oneDNN's nChw16c convolutions; batch norm's kernels (batch_norm_blocked.cc) and max
// pooling's (its channels-last kernel over each block of 16 channels) follow them.
bool CpuBackend::channels_blocked(ChannelsLastKernel /*kernel*/, DType dtype) {
  return dtype == kF32;
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
