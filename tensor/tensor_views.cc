// Tensor's views: new handles over the same Storage with other sizes, strides and offset
// (tensor.h). A channels-blocked tensor has no strides to view with: every view but reshape and
// flatten (which copy it to NCHW first) refuses it, naming the layout.
#include <algorithm>
#include <optional>
#include <vector>

#include "tensor/tensor.h"

namespace tessera {

namespace {

// Strides that let a tensor with (sizes, strides) be seen with `shape` without copying, or
// nothing. Dims are matched chunk by chunk: a chunk is a run of dims that is contiguous within
// itself, and each chunk of the old shape must be covered exactly by dims of the new one.
std::optional<Shape> view_strides(const Shape& sizes, const Shape& strides, const Shape& shape) {
  Shape new_strides(shape.size());
  if (numel(sizes) == 0) return contiguous_strides(shape);
  Shape old_sizes = sizes, old_strides = strides;
  if (old_sizes.empty()) {
    old_sizes = {1};
    old_strides = {1};
  }
  int64_t view_d = static_cast<int64_t>(shape.size()) - 1;
  int64_t chunk_base_stride = old_strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(old_sizes.size()) - 1; d >= 0; --d) {
    tensor_numel *= old_sizes[d];
    const bool chunk_ends =
        d == 0 || (old_sizes[d - 1] != 1 && old_strides[d - 1] != tensor_numel * chunk_base_stride);
    if (!chunk_ends) continue;
    while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
      new_strides[view_d] = view_numel * chunk_base_stride;
      view_numel *= shape[view_d];
      --view_d;
    }
    if (view_numel != tensor_numel) return std::nullopt;
    if (d > 0) {
      chunk_base_stride = old_strides[d - 1];
      tensor_numel = 1;
      view_numel = 1;
    }
  }
  if (view_d != -1) return std::nullopt;
  return new_strides;
}

// Replaces a single -1 by the size that keeps numel; checks the total.
Shape infer_shape(Shape shape, int64_t total, const char* op, const Shape& from) {
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      TS_CHECK(infer < 0, op, ": only one dim may be -1, got ", shape);
      infer = static_cast<int64_t>(i);
    } else {
      TS_CHECK(shape[i] >= 0, op, ": invalid size ", shape[i], " in ", shape);
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    TS_CHECK(known != 0 && total % known == 0, op, ": shape ", shape,
             " is invalid for input of shape ", from, " (", total, " elements)");
    shape[infer] = total / known;
  } else {
    TS_CHECK(known == total, op, ": shape ", shape, " is invalid for input of shape ", from, " (",
             total, " elements)");
  }
  return shape;
}

}  // namespace

Tensor Tensor::view(Shape shape) const {
  check_strided("view");
  shape = infer_shape(std::move(shape), numel_, "view", sizes_);
  auto strides = view_strides(sizes_, strides_, shape);
  TS_CHECK(strides.has_value(), "view: shape ", shape, " is not compatible with input of shape ",
           sizes_, " and strides ", strides_, " (use reshape, which copies)",
           is_channels_last() && !is_contiguous()
               ? "; the input is channels-last (NHWC), as convolutions give where asked "
                 "(Module::to(MemoryFormat::kChannelsLast)) and for bf16 on CPUs with AMX "
                 "(set_allow_preferred_layout, tensor/accelerator.h)"
               : "");
  return Tensor(storage_, std::move(shape), std::move(*strides), offset_, dtype_);
}

Tensor Tensor::reshape(Shape shape) const {
  if (blocked_) return contiguous().reshape(std::move(shape));
  shape = infer_shape(std::move(shape), numel_, "reshape", sizes_);
  if (auto strides = view_strides(sizes_, strides_, shape)) {
    return Tensor(storage_, std::move(shape), std::move(*strides), offset_, dtype_);
  }
  return contiguous().view(std::move(shape));
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  if (dim() == 0) return reshape({1});
  start_dim = wrap_dim(start_dim, dim(), "flatten");
  end_dim = wrap_dim(end_dim, dim(), "flatten");
  TS_CHECK(start_dim <= end_dim, "flatten: start_dim ", start_dim, " > end_dim ", end_dim);
  Shape shape(sizes_.begin(), sizes_.begin() + start_dim);
  int64_t n = 1;
  for (int64_t d = start_dim; d <= end_dim; ++d) n *= sizes_[d];
  shape.push_back(n);
  shape.insert(shape.end(), sizes_.begin() + end_dim + 1, sizes_.end());
  return reshape(shape);
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  check_strided("narrow");
  d = wrap_dim(d, dim(), "narrow");
  if (start < 0) start += sizes_[d];
  TS_CHECK(start >= 0 && length >= 0 && start + length <= sizes_[d], "narrow: range [", start,
           ", ", start + length, ") out of bounds for dim ", d, " of size ", sizes_[d]);
  Shape sizes = sizes_;
  sizes[d] = length;
  return Tensor(storage_, sizes, strides_, offset_ + start * strides_[d], dtype_);
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  check_strided("slice");
  d = wrap_dim(d, dim(), "slice");
  TS_CHECK(step > 0, "slice: step must be positive, got ", step);
  const int64_t n = sizes_[d];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Shape sizes = sizes_, strides = strides_;
  sizes[d] = (end - start + step - 1) / step;
  strides[d] *= step;
  return Tensor(storage_, sizes, strides, offset_ + start * strides_[d], dtype_);
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  check_strided("select");
  d = wrap_dim(d, dim(), "select");
  const int64_t n = sizes_[d];
  TS_CHECK(index >= -n && index < n, "select: index ", index, " out of range for dim ", d,
           " of size ", n);
  if (index < 0) index += n;
  Shape sizes = sizes_, strides = strides_;
  sizes.erase(sizes.begin() + d);
  strides.erase(strides.begin() + d);
  return Tensor(storage_, sizes, strides, offset_ + index * strides_[d], dtype_);
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  check_strided("transpose");
  d0 = wrap_dim(d0, dim(), "transpose");
  d1 = wrap_dim(d1, dim(), "transpose");
  Shape sizes = sizes_, strides = strides_;
  std::swap(sizes[d0], sizes[d1]);
  std::swap(strides[d0], strides[d1]);
  return Tensor(storage_, sizes, strides, offset_, dtype_);
}

Tensor Tensor::t() const {
  TS_CHECK(dim() == 2, "t: expected a 2-D tensor, got shape ", sizes_);
  return transpose(0, 1);
}

Tensor Tensor::permute(const Shape& dims) const {
  check_strided("permute");
  TS_CHECK(static_cast<int64_t>(dims.size()) == dim(), "permute: got ", dims.size(),
           " dims for a tensor of shape ", sizes_);
  Shape sizes(dims.size()), strides(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = wrap_dim(dims[i], dim(), "permute");
    TS_CHECK(!seen[d], "permute: dim ", d, " repeated in ", dims);
    seen[d] = true;
    sizes[i] = sizes_[d];
    strides[i] = strides_[d];
  }
  return Tensor(storage_, sizes, strides, offset_, dtype_);
}

Tensor Tensor::expand(const Shape& shape) const {
  check_strided("expand");
  TS_CHECK(shape.size() >= sizes_.size(), "expand: cannot expand shape ", sizes_, " to ", shape,
           " (fewer dims)");
  const size_t lead = shape.size() - sizes_.size();
  Shape sizes(shape.size()), strides(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i < lead) {
      TS_CHECK(shape[i] >= 0, "expand: new leading dim ", i, " must be sized, got ", shape);
      sizes[i] = shape[i];
      strides[i] = 0;
      continue;
    }
    const int64_t own = sizes_[i - lead];
    const int64_t want = shape[i] == -1 ? own : shape[i];
    TS_CHECK(own == want || own == 1, "expand: cannot expand shape ", sizes_, " to ", shape,
             " (dim ", i, ": ", own, " vs ", want, ")");
    sizes[i] = want;
    strides[i] = own == want ? strides_[i - lead] : 0;
  }
  return Tensor(storage_, sizes, strides, offset_, dtype_);
}

Tensor Tensor::squeeze() const {
  check_strided("squeeze");
  Shape sizes, strides;
  for (int64_t d = 0; d < dim(); ++d) {
    if (sizes_[d] != 1) {
      sizes.push_back(sizes_[d]);
      strides.push_back(strides_[d]);
    }
  }
  return Tensor(storage_, sizes, strides, offset_, dtype_);
}

Tensor Tensor::squeeze(int64_t d) const {
  check_strided("squeeze");
  d = wrap_dim(d, dim(), "squeeze");
  if (sizes_[d] != 1) return *this;
  Shape sizes = sizes_, strides = strides_;
  sizes.erase(sizes.begin() + d);
  strides.erase(strides.begin() + d);
  return Tensor(storage_, sizes, strides, offset_, dtype_);
}

Tensor Tensor::unsqueeze(int64_t d) const {
  check_strided("unsqueeze");
  d = wrap_dim(d, dim() + 1, "unsqueeze");
  Shape sizes = sizes_, strides = strides_;
  const int64_t stride = d < dim() ? strides_[d] * sizes_[d] : 1;
  sizes.insert(sizes.begin() + d, 1);
  strides.insert(strides.begin() + d, stride);
  return Tensor(storage_, sizes, strides, offset_, dtype_);
}

}  // namespace tessera
