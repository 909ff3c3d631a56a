// Indexing kernels on CUDA: index_select copies whole inner rows; gather reads and scatter_add
// accumulates (atomically: several index entries may name one destination) at the position
// whose coordinate along `dim` is replaced by the index value.
#include "tensor/cuda/cuda_check_launch.h"
#include "tensor/cuda/device_types.cuh"
#include "tensor/cuda/kernels.h"

namespace tessera {
namespace cuda {

namespace {

__global__ void index_select_kernel(const char* in, char* out, const int64_t* index,
                                    int64_t n_in, int64_t n_index, int64_t inner_bytes,
                                    int64_t total_bytes) {
  TS_GRID_STRIDE(i, total_bytes) {
    const int64_t row = i / inner_bytes, byte = i % inner_bytes;
    const int64_t o = row / n_index, k = row % n_index;
    out[i] = in[(o * n_in + index[k]) * inner_bytes + byte];
  }
}

// Offset in the contiguous `other` tensor of index element p (index is contiguous).
__device__ __forceinline__ int64_t indexed_offset(int64_t p, const int64_t* index,
                                                  const TensorArg& index_shape,
                                                  const TensorArg& other, int dim) {
  int64_t rest = p, off = 0;
  for (int d = index_shape.ndim - 1; d >= 0; --d) {
    const int64_t coord = rest % index_shape.sizes[d];
    rest /= index_shape.sizes[d];
    off += (d == dim ? index[p] : coord) * other.strides[d];
  }
  return off;
}

template <typename T>
__global__ void gather_kernel(const T* in, T* out, const int64_t* index, TensorArg index_shape,
                              TensorArg other, int dim, int64_t n) {
  TS_GRID_STRIDE(p, n) { out[p] = in[indexed_offset(p, index, index_shape, other, dim)]; }
}

template <typename T>
__device__ __forceinline__ void atomic_add(T* address, T value) {
  if constexpr (std::is_same_v<T, int64_t>) {
    atomicAdd(reinterpret_cast<unsigned long long*>(address),  // NOLINT: CUDA's 64-bit atomic
              static_cast<unsigned long long>(value));         // two's complement: signed add
  } else {
    atomicAdd(address, value);
  }
}

template <typename T>
__global__ void scatter_add_kernel(T* self, const T* src, const int64_t* index,
                                   TensorArg index_shape, TensorArg other, int dim, int64_t n) {
  TS_GRID_STRIDE(p, n) {
    atomic_add(self + indexed_offset(p, index, index_shape, other, dim), src[p]);
  }
}

}  // namespace

void launch_index_select(const void* in, void* out, const int64_t* index, int64_t outer,
                         int64_t n_in, int64_t n_index, int64_t inner, int64_t element_size,
                         cudaStream_t s) {
  const int64_t total = outer * n_index * inner * element_size;
  if (total == 0) return;
  index_select_kernel<<<blocks_for(total), kThreads, 0, s>>>(
      static_cast<const char*>(in), static_cast<char*>(out), index, n_in, n_index,
      inner * element_size, total);
  check_launch("index_select");
}

void launch_gather(const void* in, void* out, const int64_t* index, const TensorArg& index_shape,
                   const TensorArg& other_shape, int dim, DType dtype, int64_t numel,
                   cudaStream_t s) {
  if (numel == 0) return;
  TS_CUDA_DISPATCH_ALL(dtype, "gather", [&] {
    gather_kernel<scalar_t><<<blocks_for(numel), kThreads, 0, s>>>(
        static_cast<const scalar_t*>(in), static_cast<scalar_t*>(out), index, index_shape,
        other_shape, dim, numel);
  });
  check_launch("gather");
}

void launch_scatter_add(void* self, const void* src, const int64_t* index,
                        const TensorArg& index_shape, const TensorArg& other_shape, int dim,
                        DType dtype, int64_t numel, cudaStream_t s) {
  if (numel == 0) return;
  switch (dtype) {
#define TS_SCATTER_CASE(ENUM, TYPE)                                                       \
  case DType::ENUM:                                                                       \
    scatter_add_kernel<TYPE><<<blocks_for(numel), kThreads, 0, s>>>(                      \
        static_cast<TYPE*>(self), static_cast<const TYPE*>(src), index, index_shape,      \
        other_shape, dim, numel);                                                         \
    break;
    TS_SCATTER_CASE(kF32, float)
    TS_SCATTER_CASE(kF64, double)
    TS_SCATTER_CASE(kF16, half_t)
    TS_SCATTER_CASE(kBF16, bf16_t)
    TS_SCATTER_CASE(kI64, int64_t)
    TS_SCATTER_CASE(kI32, int32_t)
#undef TS_SCATTER_CASE
    default:
      fail_dtype("scatter_add (CUDA has no atomic add for u8/bool)", dtype);
  }
  check_launch("scatter_add");
}

}  // namespace cuda
}  // namespace tessera
