// Fashion-MNIST (and MNIST) as a Dataset that yields what a model eats: normalized f32 images
// [B, 1, 28, 28] and i64 labels [B]. The images stay u8 in memory (47 MB for the training set,
// not 188) and are scaled and normalized batch by batch.
//
//   auto train = std::make_shared<data::FashionMNISTDataset>("train");
//   auto test = std::make_shared<data::FashionMNISTDataset>("test");
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/mnist.h"

namespace tessera {
namespace data {

class FashionMNISTDataset : public Dataset {
 public:
  // split: "train" (60,000 images) or "test" (10,000). limit > 0 keeps the first `limit`.
  explicit FashionMNISTDataset(const std::string& split = "train",
                               const std::string& root = kFashionMnistRoot, int64_t limit = 0);
  int64_t size() const override { return images_.size(); }
  Batch get_batch(const std::vector<int64_t>& indices) const override;
  // The raw u8 images and labels.
  const ImageSet& images() const { return images_; }

 private:
  ImageSet images_;
};

}  // namespace data
}  // namespace tessera
