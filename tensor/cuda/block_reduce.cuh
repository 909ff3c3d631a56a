// Block-wide reductions for kernels that give one thread block to each row: every thread
// passes its partial value, every thread gets the block's total back.
#pragma once

#include <cuda_runtime.h>

namespace tessera {
namespace cuda {

template <typename T, typename Op>
__device__ __forceinline__ T warp_reduce(T v, Op op) {
  for (int offset = 16; offset > 0; offset /= 2) v = op(v, __shfl_down_sync(0xffffffffu, v, offset));
  return v;
}

// blockDim.x must be a multiple of 32 (at most 1024). Uses 32 slots of shared memory.
template <typename T, typename Op>
__device__ T block_reduce(T v, Op op, T identity) {
  __shared__ T slots[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warp_reduce(v, op);
  __syncthreads();  // earlier calls may still be reading slots
  if (lane == 0) slots[warp] = v;
  __syncthreads();
  const int warps = blockDim.x / 32;
  v = threadIdx.x < warps ? slots[threadIdx.x] : identity;
  if (warp == 0) v = warp_reduce(v, op);
  if (threadIdx.x == 0) slots[0] = v;
  __syncthreads();
  return slots[0];
}

struct SumOp {
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const { return a + b; }
};

struct MaxOp {
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const { return a > b ? a : b; }
};

}  // namespace cuda
}  // namespace tessera
