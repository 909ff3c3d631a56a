// Joining, splitting and indexing: cat/stack/split/chunk, index_select, gather, scatter_add.
#include "tensor/backend.h"
#include "tensor/ops.h"
#include "tensor/ops_util.h"

namespace tessera {

namespace {

// Index tensors as contiguous i64, with every value checked against [0, bound).
Tensor checked_index(const Tensor& index, int64_t bound, const char* op) {
  detail::check_defined(index, op, "index");
  TS_CHECK(index.dtype() == kI64 || index.dtype() == kI32, op,
           ": index must be i64 or i32, got ", index.dtype());
  Tensor idx = index.to(kI64).contiguous();
  if (idx.numel() > 0) {
    const int64_t lo = static_cast<int64_t>(amin(idx).item());
    const int64_t hi = static_cast<int64_t>(amax(idx).item());
    TS_CHECK(lo >= 0 && hi < bound, op, ": index out of range: values span [", lo, ", ", hi,
             "] but the dim has size ", bound);
  }
  return idx;
}

}  // namespace

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  TS_CHECK(!tensors.empty(), "cat: expected a non-empty list of tensors");
  const Tensor& first = tensors[0];
  detail::check_defined(first, "cat");
  dim = wrap_dim(dim, first.dim(), "cat");
  int64_t total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    detail::check_defined(t, "cat");
    detail::check_same_device(first, t, "cat");
    TS_CHECK(t.dtype() == first.dtype(), "cat: tensor ", i, " is ", t.dtype(), " but tensor 0 is ",
             first.dtype());
    TS_CHECK(t.dim() == first.dim(), "cat: tensor ", i, " has shape ", t.shape(),
             " but tensor 0 has shape ", first.shape());
    for (int64_t d = 0; d < t.dim(); ++d) {
      TS_CHECK(d == dim || t.size(d) == first.size(d), "cat: tensor ", i, " has shape ",
               t.shape(), ", tensor 0 has shape ", first.shape(), ": they differ in dim ", d,
               " (only dim ", dim, " may differ)");
    }
    total += t.size(dim);
  }
  Shape shape = first.shape();
  shape[dim] = total;
  Tensor out = empty(shape, first.options());
  int64_t at = 0;
  for (const Tensor& t : tensors) {
    if (t.size(dim) > 0) out.narrow(dim, at, t.size(dim)).copy_(t);
    at += t.size(dim);
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors_in, int64_t dim) {
  std::vector<Tensor> tensors;
  for (const Tensor& t : tensors_in) tensors.push_back(detail::strided(t));
  TS_CHECK(!tensors.empty(), "stack: expected a non-empty list of tensors");
  dim = wrap_dim(dim, tensors[0].dim() + 1, "stack");
  std::vector<Tensor> parts;
  parts.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    TS_CHECK(tensors[i].shape() == tensors[0].shape(), "stack: tensor ", i, " has shape ",
             tensors[i].shape(), " but tensor 0 has shape ", tensors[0].shape());
    parts.push_back(tensors[i].unsqueeze(dim));
  }
  return cat(parts, dim);
}

std::vector<Tensor> split(const Tensor& a_in, int64_t split_size, int64_t dim) {
  const Tensor a = detail::strided(a_in);  // views of an NCHW copy when channels-blocked
  TS_CHECK(split_size > 0, "split: split_size must be positive, got ", split_size);
  dim = wrap_dim(dim, a.dim(), "split");
  std::vector<Tensor> parts;
  for (int64_t at = 0; at < a.size(dim); at += split_size) {
    parts.push_back(a.narrow(dim, at, std::min(split_size, a.size(dim) - at)));
  }
  return parts;
}

std::vector<Tensor> split(const Tensor& a_in, const std::vector<int64_t>& sizes, int64_t dim) {
  const Tensor a = detail::strided(a_in);
  dim = wrap_dim(dim, a.dim(), "split");
  int64_t total = 0;
  for (int64_t s : sizes) {
    TS_CHECK(s >= 0, "split: negative size in ", sizes);
    total += s;
  }
  TS_CHECK(total == a.size(dim), "split: sizes ", sizes, " sum to ", total, " but dim ", dim,
           " has size ", a.size(dim));
  std::vector<Tensor> parts;
  int64_t at = 0;
  for (int64_t s : sizes) {
    parts.push_back(a.narrow(dim, at, s));
    at += s;
  }
  return parts;
}

std::vector<Tensor> chunk(const Tensor& a, int64_t chunks, int64_t dim) {
  TS_CHECK(chunks > 0, "chunk: chunks must be positive, got ", chunks);
  dim = wrap_dim(dim, a.dim(), "chunk");
  const int64_t size = std::max<int64_t>(1, (a.size(dim) + chunks - 1) / chunks);
  return split(a, size, dim);
}

Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index) {
  detail::check_defined(a, "index_select");
  detail::check_same_device(a, index, "index_select");
  TS_CHECK(index.dim() == 1, "index_select: index must be 1-D, got shape ", index.shape());
  dim = wrap_dim(dim, a.dim(), "index_select");
  const Tensor idx = checked_index(index, a.size(dim), "index_select");
  Shape shape = a.shape();
  shape[dim] = idx.numel();
  Tensor out = empty(shape, a.options());
  backend(a.device()).index_select(a.contiguous(), dim, idx, out);
  return out;
}

Tensor gather(const Tensor& a, int64_t dim, const Tensor& index) {
  detail::check_defined(a, "gather");
  detail::check_same_device(a, index, "gather");
  dim = wrap_dim(dim, a.dim(), "gather");
  TS_CHECK(index.dim() == a.dim(), "gather: index ", index.shape(), " and input ", a.shape(),
           " must have the same number of dims");
  for (int64_t d = 0; d < a.dim(); ++d) {
    TS_CHECK(d == dim || index.size(d) <= a.size(d), "gather: index ", index.shape(),
             " is larger than input ", a.shape(), " in dim ", d);
  }
  const Tensor idx = checked_index(index, a.size(dim), "gather");
  Tensor out = empty(idx.shape(), a.options());
  backend(a.device()).gather(a.contiguous(), dim, idx, out);
  return out;
}

Tensor scatter_add(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& src) {
  detail::check_defined(a, "scatter_add");
  detail::check_same_device(a, index, "scatter_add");
  detail::check_same_device(a, src, "scatter_add");
  dim = wrap_dim(dim, a.dim(), "scatter_add");
  TS_CHECK(index.dim() == a.dim() && src.dim() == a.dim(), "scatter_add: input ", a.shape(),
           ", index ", index.shape(), " and src ", src.shape(), " must have the same number of dims");
  for (int64_t d = 0; d < a.dim(); ++d) {
    TS_CHECK(index.size(d) <= src.size(d) && (d == dim || index.size(d) <= a.size(d)),
             "scatter_add: index ", index.shape(), " does not fit src ", src.shape(),
             " and input ", a.shape(), " in dim ", d);
  }
  const Tensor idx = checked_index(index, a.size(dim), "scatter_add");
  Tensor src_part = detail::strided(src);
  for (int64_t d = 0; d < src.dim(); ++d) src_part = src_part.narrow(d, 0, idx.size(d));
  Tensor out = a.clone();
  backend(a.device()).scatter_add(out, dim, idx, src_part.to(a.dtype()).contiguous());
  return out;
}

Tensor one_hot(const Tensor& labels, int64_t classes, DType dtype) {
  TS_CHECK(classes > 0, "one_hot: classes must be positive, got ", classes);
  checked_index(labels, classes, "one_hot");
  const Tensor range = arange(classes, TensorOptions(kI64).device(labels.device()));
  return eq(labels.to(kI64).unsqueeze(-1), range).to(dtype);
}

}  // namespace tessera
