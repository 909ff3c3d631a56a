// Error checks for the CUDA runtime, cuBLAS and cuDNN: a failed call throws tessera::Error
// naming the call, the library's error string, and where it was made.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "tensor/check.h"

#define TS_CUDA_CHECK(EXPR)                                                          \
  do {                                                                               \
    const cudaError_t ts_cuda_status = (EXPR);                                       \
    TS_CHECK(ts_cuda_status == cudaSuccess, "CUDA error in ", #EXPR, ": ",           \
             cudaGetErrorName(ts_cuda_status), " (", cudaGetErrorString(ts_cuda_status), \
             ")");                                                                   \
  } while (0)

#define TS_CUBLAS_CHECK(EXPR)                                                          \
  do {                                                                                 \
    const cublasStatus_t ts_cublas_status = (EXPR);                                    \
    TS_CHECK(ts_cublas_status == CUBLAS_STATUS_SUCCESS, "cuBLAS error in ", #EXPR, ": ", \
             cublasGetStatusName(ts_cublas_status), " (",                             \
             cublasGetStatusString(ts_cublas_status), ")");                           \
  } while (0)

#define TS_CUDNN_CHECK(EXPR)                                                           \
  do {                                                                                 \
    const cudnnStatus_t ts_cudnn_status = (EXPR);                                      \
    TS_CHECK(ts_cudnn_status == CUDNN_STATUS_SUCCESS, "cuDNN error in ", #EXPR, ": ",  \
             cudnnGetErrorString(ts_cudnn_status));                                    \
  } while (0)

// Checks that the last kernel launch was accepted (bad configuration, no kernel image for this
// GPU); errors during the kernel's run surface at the next synchronizing call.
#define TS_CUDA_CHECK_LAUNCH() TS_CUDA_CHECK(cudaGetLastError())
