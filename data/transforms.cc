#include "data/transforms.h"

#include "tensor/ops.h"

namespace tessera {
namespace data {

Tensor to_float(const Tensor& images) { return div(images.to(kF32), 255.0); }

Tensor normalize(const Tensor& images, const std::vector<double>& mean,
                 const std::vector<double>& std) {
  TS_CHECK(images.dim() == 4, "normalize: expected [B, C, H, W], got ", images.shape());
  const int64_t c = images.size(1);
  TS_CHECK(static_cast<int64_t>(mean.size()) == c && static_cast<int64_t>(std.size()) == c,
           "normalize: ", c, " channels but ", mean.size(), " means and ", std.size(), " stds");
  for (double s : std) TS_CHECK(s > 0, "normalize: std must be positive, got ", std);
  const Tensor m = from_vector<double>(mean, {1, c, 1, 1}).to(images.dtype());
  const Tensor s = from_vector<double>(std, {1, c, 1, 1}).to(images.dtype());
  return div(sub(images, m), s);
}

Tensor random_crop(const Tensor& images, int64_t padding, Generator& gen) {
  TS_CHECK(images.dim() == 4, "random_crop: expected [B, C, H, W], got ", images.shape());
  TS_CHECK(padding >= 0, "random_crop: padding must be >= 0, got ", padding);
  if (padding == 0) return images;
  const int64_t b = images.size(0), h = images.size(2), w = images.size(3);
  Tensor padded = zeros({b, images.size(1), h + 2 * padding, w + 2 * padding}, images.options());
  padded.narrow(2, padding, h).narrow(3, padding, w).copy_(images);
  const std::vector<float> offsets = rand({b, 2}, {}, &gen).to_vector<float>();
  Tensor out = empty(images.shape(), images.options());
  for (int64_t i = 0; i < b; ++i) {
    const int64_t dy = std::min<int64_t>(2 * padding, static_cast<int64_t>(offsets[2 * i] * (2 * padding + 1)));
    const int64_t dx = std::min<int64_t>(2 * padding, static_cast<int64_t>(offsets[2 * i + 1] * (2 * padding + 1)));
    out.select(0, i).copy_(padded.select(0, i).narrow(1, dy, h).narrow(2, dx, w));
  }
  return out;
}

Tensor random_horizontal_flip(const Tensor& images, double p, Generator& gen) {
  TS_CHECK(images.dim() == 4, "random_horizontal_flip: expected [B, C, H, W], got ",
           images.shape());
  TS_CHECK(p >= 0 && p <= 1, "random_horizontal_flip: p must be in [0, 1], got ", p);
  const int64_t b = images.size(0), w = images.size(3);
  const std::vector<float> draws = rand({b}, {}, &gen).to_vector<float>();
  const Tensor reversed = arange(w - 1, -1, -1, kI64);
  Tensor out = images.contiguous().clone();
  for (int64_t i = 0; i < b; ++i) {
    if (draws[i] < p) out.select(0, i).copy_(index_select(images.select(0, i), 2, reversed));
  }
  return out;
}

Transform compose(std::vector<Transform> transforms) {
  return [transforms = std::move(transforms)](Batch batch, Generator& gen) {
    for (const Transform& t : transforms) batch = t(std::move(batch), gen);
    return batch;
  };
}

namespace transforms {

Transform map_inputs(std::function<Tensor(const Tensor&)> fn) {
  TS_CHECK(fn != nullptr, "transforms::map_inputs: empty function");
  return [fn = std::move(fn)](Batch batch, Generator&) {
    batch.inputs = fn(batch.inputs);
    return batch;
  };
}

Transform to_float() { return map_inputs([](const Tensor& x) { return data::to_float(x); }); }

Transform normalize(std::vector<double> mean, std::vector<double> std) {
  return map_inputs([mean = std::move(mean), std = std::move(std)](const Tensor& x) {
    return data::normalize(x, mean, std);
  });
}

Transform random_crop(int64_t padding) {
  TS_CHECK(padding >= 0, "transforms::random_crop: padding must be >= 0, got ", padding);
  return [padding](Batch batch, Generator& gen) {
    batch.inputs = data::random_crop(batch.inputs, padding, gen);
    return batch;
  };
}

Transform random_horizontal_flip(double p) {
  TS_CHECK(p >= 0 && p <= 1, "transforms::random_horizontal_flip: p must be in [0, 1], got ", p);
  return [p](Batch batch, Generator& gen) {
    batch.inputs = data::random_horizontal_flip(batch.inputs, p, gen);
    return batch;
  };
}

}  // namespace transforms

}  // namespace data
}  // namespace tessera
