// CPU embedding backward: the weight's gradient as an index-add of the output gradient's rows,
//   grad_weight[index[i], :] += grad_out[i, :]   for i in [0, N)
// so the work is N rows of C, whatever the vocabulary size V: the rows no token named are left
// as they are (zero), never visited. (A one-hot [N, V] matrix times grad_out, or a scatter over
// all V rows, would cost N * V * C or V * C for the same result.)
//
// A token that appears twice adds twice into one row, so threads cannot split the indices
// without racing on that row. They split the columns instead: each thread owns a slice of the
// C columns of every row and walks all N indices in order, so each element's sum is added in
// index order on any thread count (bit for bit the same result).
#include <algorithm>
#include <type_traits>
#include <vector>

#include "tensor/cpu/bf16_block.h"
#include "tensor/cpu/cpu_backend.h"
#include "tensor/cpu/dispatch.h"
#include "tensor/parallel.h"

namespace tessera {
namespace cpu {

namespace {
// dst[0, width) += src[0, width), src widened through buf when T is not C. (A template: in the
// dispatch lambda `if constexpr` would not discard the other types' branch.)
template <typename T, typename C>
inline void add_row(const T* src, C* dst, int64_t width, C* buf) {
  if constexpr (std::is_same_v<T, C>) {
    for (int64_t j = 0; j < width; ++j) dst[j] += src[j];
  } else {
    widen(src, buf, width);
    for (int64_t j = 0; j < width; ++j) dst[j] += buf[j];
  }
}
}  // namespace

void CpuBackend::embedding_backward(const Tensor& grad_out, const Tensor& index,
                                    const Tensor& grad_weight) {
  const int64_t n = grad_out.size(0), c = grad_out.size(1);
  const int64_t* idx = index.data<int64_t>();
  TS_DISPATCH_FLOATING(grad_out.dtype(), "embedding_backward", [&] {
    using C = compute_t<scalar_t>;
    const scalar_t* g = grad_out.data<scalar_t>();
    C* dw = grad_weight.data<C>();
    // Slices of at least 64 columns (a few cache lines of each row) and ~32K additions a task.
    const int64_t grain = std::max<int64_t>(64, 32768 / std::max<int64_t>(n, 1));
    parallel_for(c, grain, [&](int64_t c0, int64_t c1) {
      const int64_t width = c1 - c0;
      std::vector<C> buf(std::is_same_v<scalar_t, C> ? 0 : width);
      for (int64_t i = 0; i < n; ++i) {
        add_row(g + i * c + c0, dw + idx[i] * c + c0, width, buf.data());
      }
    });
  });
}

}  // namespace cpu
}  // namespace tessera
