// cuBLAS and cuDNN handles: one per (host thread, device), created on first use and bound to
// the calling thread's current stream each time they are handed out.
#pragma once

#include <cublas_v2.h>
#include <cudnn.h>

namespace tessera {
namespace cuda {

cublasHandle_t cublas_handle(int device);
cudnnHandle_t cudnn_handle(int device);

}  // namespace cuda
}  // namespace tessera
