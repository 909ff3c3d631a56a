// Questions about the devices of this machine, asked the same way in CPU-only and CUDA builds:
//
//   if (!cuda_is_available()) GTEST_SKIP() << cuda_unavailable_reason();
//
// A CPU-only build answers "no CUDA" with the reason "built without --config=cuda"; a CUDA
// build on a machine without a GPU names what the CUDA runtime said.
#pragma once

#include <string>

#include "tensor/device.h"
#include "tensor/dtype.h"

namespace tessera {

// Devices of this type the process can use (the CPU: 1; CUDA: 0 without a backend or a GPU).
int device_count(DeviceType type);
bool cuda_is_available();
std::string cuda_unavailable_reason();

// Throws, naming the device and why, unless `device` exists in this process (a CUDA device in
// a build without CUDA, on a machine without a GPU, or past the last GPU does not).
void check_device_exists(Device device);

// Waits until all work queued on `device` has finished (a no-op on the CPU).
void synchronize(Device device);

// Whether autocast to `low_precision` (kF16 or kBF16) makes `device`'s matrix products and
// convolutions faster than f32 (it computes that dtype natively), and if not, what to choose:
// one sentence for users, empty when the device computes it natively. A CPU computes bf16
// natively where oneDNN finds AVX-512 BF16 or AMX; no CPU here computes f16 (fp16 autocast
// widens to f32, docs/AMP.md "What to choose on a CPU"). CUDA devices compute both.
bool computes_natively(Device device, DType low_precision);
std::string low_precision_advice(Device device, DType low_precision);

// Whether f32 matrix products and convolutions on CUDA may use TF32 tensor cores (10-bit
// mantissa inputs, f32 accumulation). Off by default, so f32 means f32 unless asked.
void set_allow_tf32(bool allow);
bool allow_tf32();

// Whether f32 3x3 convolutions at stride 1 may use Winograd's minimal filtering F(4x4, 3x3) (Lavin
// and Gray, 2016) on the CPU: oneDNN's primitives, on CPUs with AVX-512, for the shapes where they
// measured faster (tensor/cpu/conv_path.h), in all three passes. f16 convolutions (and bf16 ones on
// CPUs without native bf16), which run the f32 kernels on converted values, take them too, so fp16
// autocast keeps costing what f32 does. Each 4x4 tile of outputs costs 36 products per channel pair
// instead of 144, so ResNets' 3x3 layers with 32-256 channels run in 0.4-0.7x the time. The
// arithmetic is f32, but the tile transforms add rounding: on ResNet shapes each pass lay 4e-7 to
// 1.5e-6 (relative norm) from f64, a direct convolution's 1.8e-7 to 2.8e-6 (its weight gradients'
// long sums; docs/BENCHMARKS.md). cuDNN's Winograd algorithms make the same trade on GPUs. On by
// default; off (or TESSERA_CONV_WINOGRAD=off in the environment, read at the first call) gives
// direct convolutions everywhere.
void set_allow_winograd(bool allow);
bool allow_winograd();
// Whether `device` has that algorithm at all: the CPU where oneDNN has it (AVX-512); false for
// CUDA devices, whose library picks its own algorithms.
bool winograd_available(Device device);

// Whether a convolution may give channels-last (NHWC) output from NCHW input where the device's
// kernels run fastest on NHWC (Backend::prefers_channels_last): bf16 convolutions on CPUs with
// AMX, whose oneDNN primitives would otherwise transpose the activations in and out on every
// call. The layers after such a convolution (batch norm, pooling, elementwise ops) keep the
// layout and the next convolution reads it as it is, so a ResNet's activations stay NHWC from
// the stem on, as if the model had been given Module::to(MemoryFormat::kChannelsLast). Values
// are the same either way; only the strides differ, so Tensor::view of a flattened activation
// fails (reshape and flatten copy). On by default; off (or TESSERA_PREFERRED_LAYOUT=off in the
// environment, read at the first call) keeps NCHW outputs from NCHW inputs.
void set_allow_preferred_layout(bool allow);
bool allow_preferred_layout();

}  // namespace tessera
