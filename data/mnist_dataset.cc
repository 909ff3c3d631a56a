#include "data/mnist_dataset.h"

#include "data/transforms.h"
#include "tensor/ops.h"

namespace tessera {
namespace data {

FashionMNISTDataset::FashionMNISTDataset(const std::string& split, const std::string& root,
                                         int64_t limit) {
  TS_CHECK(split == "train" || split == "test", "FashionMNISTDataset: split must be \"train\" or "
           "\"test\", got \"", split, "\"");
  TS_CHECK(limit >= 0, "FashionMNISTDataset: limit must be >= 0, got ", limit);
  images_ = load_mnist_format(root, split == "train", limit);
}

Batch FashionMNISTDataset::get_batch(const std::vector<int64_t>& indices) const {
  const Tensor idx = from_vector<int64_t>(indices, {static_cast<int64_t>(indices.size())});
  const Tensor images = to_float(index_select(images_.images, 0, idx));
  return {normalize(images, kFashionMnistMean, kFashionMnistStd),
          index_select(images_.labels, 0, idx)};
}

}  // namespace data
}  // namespace tessera
