// Random tensors from counter-based streams (see tensor/random.h).
#include "tensor/backend.h"
#include "tensor/deferred_init.h"
#include "tensor/ops.h"
#include "tensor/ops_util.h"

namespace tessera {

namespace {
Generator& pick(Generator* gen) { return gen != nullptr ? *gen : default_generator(); }
}  // namespace

Tensor& uniform_(Tensor& t, double low, double high, Generator* gen) {
  detail::check_floating(t, "uniform_");
  TS_CHECK(low <= high, "uniform_: low ", low, " > high ", high);
  if (is_deferred(t)) {
    // Recorded with the counters the eager call claims (tensor/deferred_init.h).
    DeferredFill fill{DeferredFill::Kind::kUniform, low, high, pick(gen).seed(), 0};
    fill.offset = pick(gen).claim(static_cast<uint64_t>(t.numel()));
    detail::record_deferred_fill(t, fill, "uniform_");
    return t;
  }
  Tensor out = t.is_contiguous() ? t : empty(t.shape(), t.options());
  // Each element draws from its own counter, so claiming numel counters always suffices.
  const uint64_t offset = pick(gen).claim(static_cast<uint64_t>(t.numel()));
  backend(t.device()).uniform(out, low, high, pick(gen).seed(), offset);
  if (!out.is_same(t)) t.copy_(out);
  return t;
}

Tensor& normal_(Tensor& t, double mean, double std, Generator* gen) {
  detail::check_floating(t, "normal_");
  TS_CHECK(std >= 0, "normal_: std must be non-negative, got ", std);
  if (is_deferred(t)) {
    DeferredFill fill{DeferredFill::Kind::kNormal, mean, std, pick(gen).seed(), 0};
    fill.offset = pick(gen).claim(static_cast<uint64_t>(t.numel()));
    detail::record_deferred_fill(t, fill, "normal_");
    return t;
  }
  Tensor out = t.is_contiguous() ? t : empty(t.shape(), t.options());
  const uint64_t offset = pick(gen).claim(static_cast<uint64_t>(t.numel()));
  backend(t.device()).normal(out, mean, std, pick(gen).seed(), offset);
  if (!out.is_same(t)) t.copy_(out);
  return t;
}

Tensor uniform(const Shape& shape, double low, double high, const TensorOptions& options,
               Generator* gen) {
  Tensor t = empty(shape, options);
  return uniform_(t, low, high, gen);
}

Tensor rand(const Shape& shape, const TensorOptions& options, Generator* gen) {
  return uniform(shape, 0, 1, options, gen);
}

Tensor normal(const Shape& shape, double mean, double std, const TensorOptions& options,
              Generator* gen) {
  Tensor t = empty(shape, options);
  return normal_(t, mean, std, gen);
}

Tensor randn(const Shape& shape, const TensorOptions& options, Generator* gen) {
  return normal(shape, 0, 1, options, gen);
}

Tensor bernoulli(const Shape& shape, double p, const TensorOptions& options, Generator* gen) {
  TS_CHECK(p >= 0 && p <= 1, "bernoulli: probability must be in [0, 1], got ", p);
  const Tensor u = rand(shape, TensorOptions(kF32).device(options.device()), gen);
  return lt(u, p).to(options.dtype());
}

}  // namespace tessera
