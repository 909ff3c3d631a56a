#include "data/mnist.h"

#include <sys/stat.h>

#include "data/idx.h"
#include "tensor/ops.h"

namespace tessera {
namespace data {

namespace {
// The file, gzip'd or not, whichever exists.
std::string find_file(const std::string& root, const std::string& stem) {
  struct stat st;
  for (const std::string& candidate : {root + "/" + stem + ".gz", root + "/" + stem}) {
    if (::stat(candidate.c_str(), &st) == 0) return candidate;
  }
  TS_FAIL("MNIST: neither ", root, "/", stem, ".gz nor ", root, "/", stem,
          " exists (tools/setup.sh installs Fashion-MNIST under ", kFashionMnistRoot, ")");
}
}  // namespace

ImageSet load_mnist_format(const std::string& root, bool train, int64_t limit) {
  TS_CHECK(limit >= 0, "MNIST: limit must be >= 0 (0 keeps every image), got ", limit);
  const std::string prefix = train ? "train" : "t10k";
  const std::string image_path = find_file(root, prefix + "-images-idx3-ubyte");
  const std::string label_path = find_file(root, prefix + "-labels-idx1-ubyte");
  // The counts in the two headers, compared before either file is read: with a limit the reads
  // stop after its rows and would not see the difference.
  const int64_t image_count = read_idx_shape(image_path)[0];
  const int64_t label_count = read_idx_shape(label_path)[0];
  TS_CHECK(image_count == label_count, "MNIST: the headers disagree: '", image_path, "' holds ",
           image_count, " images but '", label_path, "' holds ", label_count, " labels");
  const int64_t rows = limit > 0 ? limit : -1;
  Tensor images = read_idx(image_path, rows);
  Tensor labels = read_idx(label_path, rows);
  TS_CHECK(images.dtype() == kU8 && images.dim() == 3 && images.size(1) == kMnistImage.height &&
               images.size(2) == kMnistImage.width,
           "MNIST: '", image_path, "' holds ", images.dtype(), " ", images.shape(),
           ", expected u8 [N, ", kMnistImage.height, ", ", kMnistImage.width, "]");
  TS_CHECK(labels.dtype() == kU8 && labels.dim() == 1, "MNIST: '", label_path, "' holds ",
           labels.dtype(), " ", labels.shape(), ", expected u8 [N]");
  if (labels.numel() > 0) {
    const double top = amax(labels).item();
    TS_CHECK(top <= 9, "MNIST: '", label_path, "' has label ", top, ", expected 0..9");
  }
  return {images.unsqueeze(1), labels.to(kI64)};
}

}  // namespace data
}  // namespace tessera
