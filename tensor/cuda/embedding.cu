// Embedding backward on CUDA: grad_weight[index[i]] += grad_out[i] (tensor/cpu/embedding.cc
// says why only the indexed rows are touched), deterministically.
//
// Atomic additions would let a token repeated in the batch add its rows in whatever order the
// warps arrive, so two runs could differ in the last bits. Instead each thread block owns
// kRowsPerBlock consecutive rows of the vocabulary: it reads the indices in order (a tile at a
// time through shared memory) and adds the gradient rows of those that fall in its rows, its
// threads spread over the C columns. Every element is then summed in index order by one
// thread. The price: every block reads all N indices (8-byte loads from L2, cheap next to the
// N * C gradient), and a block whose rows are very frequent does their additions alone.
#include "tensor/cuda/cuda_check_launch.h"
#include "tensor/cuda/device_types.cuh"
#include "tensor/cuda/transformer_kernels.h"

namespace tessera {
namespace cuda {

namespace {

constexpr int kTile = 256;  // indices per shared-memory tile; also the threads of a block
constexpr int64_t kRowsPerBlock = 64;

template <typename T>
__global__ void embedding_backward_kernel(const T* grad_out, const int64_t* index,
                                          acc_t<T>* grad_weight, int64_t n, int64_t c) {
  __shared__ int64_t tile[kTile];
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock;
  const int64_t last = first + kRowsPerBlock;
  for (int64_t i0 = 0; i0 < n; i0 += kTile) {
    const int64_t m = n - i0 < kTile ? n - i0 : kTile;
    __syncthreads();  // the previous tile is no longer read
    if (threadIdx.x < m) tile[threadIdx.x] = index[i0 + threadIdx.x];
    __syncthreads();
    for (int64_t k = 0; k < m; ++k) {
      const int64_t row = tile[k];
      if (row < first || row >= last) continue;  // the same branch for the whole block
      const T* src = grad_out + (i0 + k) * c;
      acc_t<T>* dst = grad_weight + row * c;
      for (int64_t j = threadIdx.x; j < c; j += blockDim.x) dst[j] += load(src[j]);
    }
  }
}

}  // namespace

void launch_embedding_backward(const void* grad_out, const int64_t* index, void* grad_weight,
                               DType dtype, int64_t n, int64_t c, int64_t v,
                               cudaStream_t stream) {
  if (n == 0 || c == 0 || v == 0) return;
  const unsigned blocks = static_cast<unsigned>((v + kRowsPerBlock - 1) / kRowsPerBlock);
  TS_CUDA_DISPATCH_FLOATING(dtype, "embedding_backward", [&] {
    embedding_backward_kernel<scalar_t><<<blocks, kTile, 0, stream>>>(
        static_cast<const scalar_t*>(grad_out), index,
        static_cast<acc_t<scalar_t>*>(grad_weight), n, c);
  });
  check_launch("embedding_backward");
}

}  // namespace cuda
}  // namespace tessera
