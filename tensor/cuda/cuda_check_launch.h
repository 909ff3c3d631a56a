// check_launch(): for the .cu files, which do not include the Tensor headers. Throws when the
// last kernel launch was refused (bad configuration, no kernel image for this GPU).
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace tessera {
namespace cuda {

inline void check_launch(const char* kernel) {
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) {
    throw std::runtime_error(std::string("CUDA kernel launch failed (") + kernel + "): " +
                             cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")");
  }
}

}  // namespace cuda
}  // namespace tessera
