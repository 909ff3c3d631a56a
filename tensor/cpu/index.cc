// CPU indexing kernels: index_select, gather, scatter_add (index tensors are i64, in range).
#include <cstring>

#include "tensor/cpu/cpu_backend.h"
#include "tensor/cpu/dispatch.h"
#include "tensor/parallel.h"

namespace tessera {
namespace cpu {

namespace {

// Calls fn(index_position, offset_in_other) for every element of a contiguous `index` tensor,
// where offset_in_other is the same multi-index in a contiguous tensor of shape `other`, with
// the coordinate along `dim` replaced by the index value.
template <typename F>
void for_each_indexed(const Tensor& index, const Shape& other, int64_t dim, F fn) {
  const int64_t* idx = index.data<int64_t>();
  const Shape& shape = index.shape();
  const Shape other_strides = contiguous_strides(other);
  const int64_t nd = static_cast<int64_t>(shape.size());
  Shape pos(nd, 0);
  for (int64_t p = 0; p < index.numel(); ++p) {
    int64_t off = 0;
    for (int64_t d = 0; d < nd; ++d) off += (d == dim ? idx[p] : pos[d]) * other_strides[d];
    fn(p, off);
    for (int64_t d = nd - 1; d >= 0; --d) {
      if (++pos[d] < shape[d]) break;
      pos[d] = 0;
    }
  }
}

}  // namespace

void CpuBackend::index_select(const Tensor& in, int64_t dim, const Tensor& index,
                              const Tensor& out) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= in.size(d);
  for (int64_t d = dim + 1; d < in.dim(); ++d) inner *= in.size(d);
  const int64_t n_in = in.size(dim), n_out = index.numel();
  const int64_t* idx = index.data<int64_t>();
  const size_t bytes = inner * in.element_size();
  const char* src = static_cast<const char*>(in.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  parallel_for(outer * n_out, std::max<int64_t>(1, 4096 / std::max<int64_t>(inner, 1)),
               [&](int64_t t0, int64_t t1) {
                 for (int64_t t = t0; t < t1; ++t) {
                   const int64_t o = t / n_out, i = t % n_out;
                   std::memcpy(dst + t * bytes, src + (o * n_in + idx[i]) * bytes, bytes);
                 }
               });
}

void CpuBackend::gather(const Tensor& in, int64_t dim, const Tensor& index, const Tensor& out) {
  TS_DISPATCH_ALL(in.dtype(), "gather", [&] {
    const scalar_t* src = static_cast<const scalar_t*>(in.raw_data());
    scalar_t* dst = static_cast<scalar_t*>(out.raw_data());
    for_each_indexed(index, in.shape(), dim, [&](int64_t p, int64_t off) { dst[p] = src[off]; });
  });
}

void CpuBackend::scatter_add(const Tensor& self, int64_t dim, const Tensor& index,
                             const Tensor& src) {
  TS_DISPATCH_ALL(self.dtype(), "scatter_add", [&] {
    using C = compute_t<scalar_t>;
    const scalar_t* s = static_cast<const scalar_t*>(src.raw_data());
    scalar_t* dst = static_cast<scalar_t*>(self.raw_data());
    for_each_indexed(index, self.shape(), dim, [&](int64_t p, int64_t off) {
      dst[off] = scalar_t(C(dst[off]) + C(s[p]));
    });
  });
}

}  // namespace cpu
}  // namespace tessera
