// Differentiable views and shape ops: the gradient takes the inverse path (reshape back,
// transpose back, scatter into the slice, sum over the expanded dims). A channels-blocked input
// (nChw16c, which no strides express) is viewed as an NCHW copy of it (a differentiable
// contiguous()), so a model's shape ops work on such activations (ResNet-20's subsampling
// shortcut slices them); Tensor's own views refuse it instead.
#include <numeric>

#include "autograd/autocast.h"
#include "autograd/custom_op.h"
#include "autograd/functions.h"
#include "autograd/functions_util.h"

namespace tessera {

Variable reshape(const Variable& a, const Shape& shape) {
  const Shape input = a.shape();
  return record("ReshapeBackward", a.data().reshape(shape), {a},
                [input](const Tensor& g) -> Grads { return {g.reshape(input)}; });
}

namespace {
Variable strided(const Variable& a) { return a.data().is_channels_blocked() ? contiguous(a) : a; }
// The same for a gradient a backward views (the next layer's may be channels-blocked).
Tensor strided(const Tensor& g) { return g.is_channels_blocked() ? g.contiguous() : g; }
}  // namespace

Variable view(const Variable& a_in, const Shape& shape) {
  const Variable a = strided(a_in);
  const Shape input = a.shape();
  return record("ViewBackward", a.data().view(shape), {a},
                [input](const Tensor& g) -> Grads { return {g.reshape(input)}; });
}

Variable flatten(const Variable& a, int64_t start_dim, int64_t end_dim) {
  const Shape input = a.shape();
  return record("FlattenBackward", a.data().flatten(start_dim, end_dim), {a},
                [input](const Tensor& g) -> Grads { return {g.reshape(input)}; });
}

Variable transpose(const Variable& a_in, int64_t dim0, int64_t dim1) {
  const Variable a = strided(a_in);
  return record("TransposeBackward", a.data().transpose(dim0, dim1), {a},
                [dim0, dim1](const Tensor& g) -> Grads { return {strided(g).transpose(dim0, dim1)}; });
}

Variable permute(const Variable& a_in, const Shape& dims) {
  const Variable a = strided(a_in);
  Tensor out = a.data().permute(dims);
  Shape inverse(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) inverse[wrap_dim(dims[i], a.dim(), "permute")] = i;
  return record("PermuteBackward", out, {a},
                [inverse](const Tensor& g) -> Grads { return {strided(g).permute(inverse)}; });
}

namespace {
// Gradient of a view that picks part of the input: zeros with the part filled in.
Variable part(const char* name, const Variable& a, Tensor out,
              std::function<Tensor(const Tensor&)> same_view) {
  const detail::InputMeta m = detail::meta(a);
  return record(name, std::move(out), {a}, [m, same_view](const Tensor& g) -> Grads {
    Tensor full = zeros(m.shape, g.options());
    same_view(full).copy_(g);
    return {full};
  });
}
}  // namespace

Variable narrow(const Variable& a_in, int64_t dim, int64_t start, int64_t length) {
  const Variable a = strided(a_in);
  return part("NarrowBackward", a, a.data().narrow(dim, start, length),
              [dim, start, length](const Tensor& t) { return t.narrow(dim, start, length); });
}

Variable slice(const Variable& a_in, int64_t dim, int64_t start, int64_t end, int64_t step) {
  const Variable a = strided(a_in);
  return part("SliceBackward", a, a.data().slice(dim, start, end, step),
              [=](const Tensor& t) { return t.slice(dim, start, end, step); });
}

Variable select(const Variable& a_in, int64_t dim, int64_t index) {
  const Variable a = strided(a_in);
  return part("SelectBackward", a, a.data().select(dim, index),
              [dim, index](const Tensor& t) { return t.select(dim, index); });
}

Variable expand(const Variable& a_in, const Shape& shape) {
  const Variable a = strided(a_in);
  const Shape input = a.shape();
  return record("ExpandBackward", a.data().expand(shape), {a},
                [input](const Tensor& g) -> Grads { return {sum_to(g, input)}; });
}

Variable squeeze(const Variable& a_in, int64_t dim) {
  const Variable a = strided(a_in);
  const Shape input = a.shape();
  return record("SqueezeBackward", a.data().squeeze(dim), {a},
                [input](const Tensor& g) -> Grads { return {g.reshape(input)}; });
}

Variable unsqueeze(const Variable& a_in, int64_t dim) {
  const Variable a = strided(a_in);
  const Shape input = a.shape();
  return record("UnsqueezeBackward", a.data().unsqueeze(dim), {a},
                [input](const Tensor& g) -> Grads { return {g.reshape(input)}; });
}

Variable contiguous(const Variable& a) {
  if (a.data().is_contiguous()) return a;
  return record("ContiguousBackward", a.data().contiguous(), {a},
                [](const Tensor& g) -> Grads { return {g}; });
}

Variable contiguous(const Variable& a, MemoryFormat format) {
  if (a.data().is_contiguous(format)) return a;
  return record("ContiguousBackward", a.data().contiguous(format), {a},
                [](const Tensor& g) -> Grads { return {g}; });
}

namespace {
// The cast's backward casts the gradient back to the source dtype. It saves nothing, so it
// stays usable after a backward: autocast's cache shares one cast of a parameter among all the
// forwards inside a guard, each of which may run its own backward.
class ToDTypeBackward final : public Node {
 public:
  explicit ToDTypeBackward(DType from) : from_(from) {}
  std::string name() const override { return "ToDTypeBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    return {grads[0].defined() ? grads[0].to(from_) : Tensor()};
  }
  void release_saved() override {}

 private:
  DType from_;
};
}  // namespace

Variable to(const Variable& a, DType dtype) {
  if (a.dtype() == dtype) return a;
  Tensor out = a.data().to(dtype);
  if (!any_requires_grad({a})) return Variable(std::move(out));
  auto node = std::make_shared<ToDTypeBackward>(a.dtype());
  node->set_next_edges({gradient_edge(a)});
  return Variable::from_node(std::move(out), std::move(node));
}

Variable to(const Variable& a, Device device) {
  if (a.device() == device) return a;
  const Device from = a.device();
  return record("ToDeviceBackward", a.data().to(device), {a},
                [from](const Tensor& g) -> Grads { return {g.to(from)}; });
}

Variable cat(const std::vector<Variable>& parts_in, int64_t dim) {
  std::vector<Variable> parts = parts_in;
  if (detail::autocast_any_enabled()) detail::autocast_inputs("cat", parts.data(), parts.size());
  std::vector<Tensor> tensors;
  std::vector<int64_t> sizes;
  for (const Variable& v : parts) {
    tensors.push_back(v.data());
    sizes.push_back(v.dim() > 0 ? v.size(wrap_dim(dim, v.dim(), "cat")) : 0);
  }
  Tensor out = cat(tensors, dim);
  const int64_t d = wrap_dim(dim, out.dim(), "cat");
  return record("CatBackward", out, parts, [sizes, d](const Tensor& g_in) -> Grads {
    const Tensor g = strided(g_in);
    Grads grads;
    int64_t at = 0;
    for (int64_t s : sizes) {
      grads.push_back(g.narrow(d, at, s));
      at += s;
    }
    return grads;
  });
}

Variable stack(const std::vector<Variable>& parts, int64_t dim) {
  TS_CHECK(!parts.empty(), "stack: expected a non-empty list");
  const int64_t d = wrap_dim(dim, parts[0].dim() + 1, "stack");
  std::vector<Variable> unsqueezed;
  for (const Variable& v : parts) unsqueezed.push_back(unsqueeze(v, d));
  return cat(unsqueezed, d);
}

std::vector<Variable> split(const Variable& a, int64_t split_size, int64_t dim) {
  TS_CHECK(split_size > 0, "split: split_size must be positive, got ", split_size);
  const int64_t d = wrap_dim(dim, a.dim(), "split");
  std::vector<Variable> out;
  for (int64_t at = 0; at < a.size(d); at += split_size) {
    out.push_back(narrow(a, d, at, std::min(split_size, a.size(d) - at)));
  }
  return out;
}

std::vector<Variable> chunk(const Variable& a, int64_t chunks, int64_t dim) {
  TS_CHECK(chunks > 0, "chunk: chunks must be positive, got ", chunks);
  const int64_t d = wrap_dim(dim, a.dim(), "chunk");
  return split(a, std::max<int64_t>(1, (a.size(d) + chunks - 1) / chunks), d);
}

Variable index_select(const Variable& a, int64_t dim, const Tensor& index) {
  const Shape input = a.shape();
  const int64_t d = wrap_dim(dim, a.dim(), "index_select");
  return record("IndexSelectBackward", index_select(a.data(), d, index), {a},
                [input, d, index](const Tensor& g) -> Grads {
                  // Each selected row's gradient goes back to the row it came from.
                  Shape shape(g.dim(), 1);
                  shape[d] = index.numel();
                  const Tensor idx = index.to(kI64).reshape(shape).expand(g.shape());
                  return {scatter_add(zeros(input, g.options()), d, idx, g)};
                });
}

Variable gather(const Variable& a, int64_t dim, const Tensor& index) {
  const Shape input = a.shape();
  const int64_t d = wrap_dim(dim, a.dim(), "gather");
  return record("GatherBackward", gather(a.data(), d, index), {a},
                [input, d, index](const Tensor& g) -> Grads {
                  return {scatter_add(zeros(input, g.options()), d, index, g)};
                });
}

}  // namespace tessera
