// MNIST and Fashion-MNIST: 28x28 grey images in 10 classes, read from their IDX files.
#pragma once

#include <string>

#include "tensor/tensor.h"

namespace tessera {
namespace data {

inline constexpr const char* kFashionMnistRoot = "/usr/share/datasets/fashion-mnist";

// The shape of one image, channels x height x width.
struct ImageShape {
  int64_t channels, height, width;
};
// MNIST's and Fashion-MNIST's images: one grey channel of 28 x 28 pixels. Synthetic stand-ins
// for them, and models sized for them, take their shape from here.
inline constexpr ImageShape kMnistImage{1, 28, 28};

struct ImageSet {
  Tensor images;  // [N, 1, 28, 28] u8
  Tensor labels;  // [N] i64, 0..9
  int64_t size() const { return labels.defined() ? labels.size(0) : 0; }
};

// Reads {train,t10k}-{images-idx3,labels-idx1}-ubyte(.gz) under root; checks that images are
// [N, 28, 28] u8, labels [N] u8 in 0..9, and that both headers say the same N (compared before
// reading, so a limit does not hide a mismatch). limit > 0 keeps the first `limit` images and
// labels and reads the files no further (read_idx's rows, which checks each file's size on disk
// against its header); 0 keeps all.
ImageSet load_mnist_format(const std::string& root, bool train, int64_t limit = 0);
inline ImageSet FashionMNIST(const std::string& root = kFashionMnistRoot, bool train = true,
                             int64_t limit = 0) {
  return load_mnist_format(root, train, limit);
}
// The original MNIST digits: the same files and format, from wherever they were put.
inline ImageSet MNIST(const std::string& root, bool train = true, int64_t limit = 0) {
  return load_mnist_format(root, train, limit);
}

}  // namespace data
}  // namespace tessera
