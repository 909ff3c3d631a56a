// Questions about the devices of this machine, asked the same way in CPU-only and CUDA builds:
//
//   if (!cuda_is_available()) GTEST_SKIP() << cuda_unavailable_reason();
//
// A CPU-only build answers "no CUDA" with the reason "built without --config=cuda"; a CUDA
// build on a machine without a GPU names what the CUDA runtime said.
#pragma once

#include <string>

#include "tensor/device.h"

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

// Whether f32 matrix products and convolutions on CUDA may use TF32 tensor cores (10-bit
// mantissa inputs, f32 accumulation). Off by default, so f32 means f32 unless asked.
void set_allow_tf32(bool allow);
bool allow_tf32();

}  // namespace tessera
