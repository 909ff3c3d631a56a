#include "tensor/cuda/handles.h"

#include <array>

#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/runtime.h"

namespace tessera {
namespace cuda {

namespace {

// Handles live for the thread's lifetime; destroying them at thread exit could race the CUDA
// runtime's own teardown, so they are left to the process end.
thread_local std::array<cublasHandle_t, kMaxDevicesPerType> t_cublas{};
thread_local std::array<cudnnHandle_t, kMaxDevicesPerType> t_cudnn{};

}  // namespace

cublasHandle_t cublas_handle(int device) {
  DeviceGuard guard(device);
  cublasHandle_t& h = t_cublas[device];
  if (h == nullptr) TS_CUBLAS_CHECK(cublasCreate(&h));
  TS_CUBLAS_CHECK(cublasSetStream(h, current_stream(device).handle()));
  return h;
}

cudnnHandle_t cudnn_handle(int device) {
  DeviceGuard guard(device);
  cudnnHandle_t& h = t_cudnn[device];
  if (h == nullptr) TS_CUDNN_CHECK(cudnnCreate(&h));
  TS_CUDNN_CHECK(cudnnSetStream(h, current_stream(device).handle()));
  return h;
}

}  // namespace cuda
}  // namespace tessera
