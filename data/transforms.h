// Batch transforms for image data: scaling, normalization, and the seeded augmentations used to
// train ResNets (random crop with padding, horizontal flip). Each takes the generator it draws
// from, so a DataLoader can make them reproducible per (seed, epoch, batch).
#pragma once

#include <functional>
#include <vector>

#include "data/dataset.h"
#include "tensor/random.h"

namespace tessera {
namespace data {

using Transform = std::function<Batch(Batch batch, Generator& gen)>;

// u8 images -> f32 in [0, 1].
Tensor to_float(const Tensor& images);
// (x - mean[c]) / std[c] per channel of [B, C, H, W].
Tensor normalize(const Tensor& images, const std::vector<double>& mean,
                 const std::vector<double>& std);
// Pads each image with `padding` zeros on every side and crops back to H x W at an offset drawn
// per image.
Tensor random_crop(const Tensor& images, int64_t padding, Generator& gen);
// Mirrors each image left-right with probability p.
Tensor random_horizontal_flip(const Tensor& images, double p, Generator& gen);

// Applies transforms in order.
Transform compose(std::vector<Transform> transforms);

// The same operations as Transforms of a batch's inputs, to compose without writing lambdas:
//   DataLoader loader(train, DataLoaderOptions(128).shuffle(true),
//                     compose({transforms::random_crop(2), transforms::random_horizontal_flip(0.5)}));
namespace transforms {
Transform to_float();
Transform normalize(std::vector<double> mean, std::vector<double> std);
Transform random_crop(int64_t padding);
Transform random_horizontal_flip(double p);
// Any function of the inputs alone (no random draws).
Transform map_inputs(std::function<Tensor(const Tensor&)> fn);
}  // namespace transforms

// Fashion-MNIST's channel statistics over the training set.
inline const std::vector<double> kFashionMnistMean = {0.2860};
inline const std::vector<double> kFashionMnistStd = {0.3530};

}  // namespace data
}  // namespace tessera
