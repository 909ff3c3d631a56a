#include "tools/train/data.h"

#include <algorithm>

#include "data/distributed_sampler.h"
#include "data/mnist.h"
#include "data/text_data.h"
#include "data/token_windows.h"
#include "data/transforms.h"

namespace tessera {
namespace train {

namespace {

// u8 images -> normalized f32 (synthetic data is already f32), plus augmentation if asked.
data::Transform make_transform(const Config& c, bool augment) {
  const bool real = c.data == "fashion-mnist";
  return [real, augment](data::Batch batch, Generator& gen) {
    if (real) {
      batch.inputs = data::normalize(data::to_float(batch.inputs), data::kFashionMnistMean,
                                     data::kFashionMnistStd);
    }
    if (augment) {
      batch.inputs = data::random_crop(batch.inputs, 2, gen);
      batch.inputs = data::random_horizontal_flip(batch.inputs, 0.5, gen);
    }
    return batch;
  };
}

}  // namespace

Data load_data(const Config& c) {
  Data d;
  if (c.data == "text") {
    // Tokenized once and stored (data/text_data.h): later runs read the token files.
    const data::TextTokens text = data::load_text_tokens(
        data::TextDataOptions()
            .corpus(c.text_file.empty() ? "fortunes" : c.text_file)
            .tokenizer(c.tokenizer));
    d.train = std::make_shared<data::TokenWindows>(text.train, c.seq_len, c.train_limit);
    d.test = std::make_shared<data::TokenWindows>(text.val, c.seq_len, c.val_limit);
    d.vocab_size = text.vocab_size;
    d.val_tokens = text.val;
    return d;
  }
  if (c.data == "synthetic") {
    const data::ImageShape& s = data::kMnistImage;  // shaped as Fashion-MNIST
    d.train = std::make_shared<data::SyntheticImages>(c.synthetic_size, s.channels, s.height,
                                                      s.width, c.num_classes, c.seed);
    d.test = std::make_shared<data::SyntheticImages>(std::max<int64_t>(c.synthetic_size / 5, 1),
                                                     s.channels, s.height, s.width, c.num_classes,
                                                     c.seed + 1);
    return d;
  }
  // --train-limit reads only the images it keeps (the first N).
  const data::ImageSet train = data::FashionMNIST(c.data_dir, true, c.train_limit);
  const data::ImageSet test = data::FashionMNIST(c.data_dir, false);
  d.train = std::make_shared<data::TensorDataset>(train.images, train.labels);
  d.test = std::make_shared<data::TensorDataset>(test.images, test.labels);
  return d;
}

Loaders make_loaders(const Config& c, const Data& d, const Strategy& strategy, Device device) {
  // Batches assigned at run time: every rank reads the whole set (the queue splits it).
  const int replicas = strategy.assigns_batches() ? 1 : strategy.replicas();
  std::shared_ptr<data::Sampler> train_sampler, test_sampler;
  if (replicas > 1) {
    train_sampler = std::make_shared<data::DistributedSampler>(
        d.train->size(), data::DistributedSamplerOptions(replicas, strategy.replica()).seed(c.seed));
  }
  if (strategy.evaluation_replicas() > 1) {
    test_sampler = std::make_shared<data::DistributedSampler>(
        d.test->size(),
        data::DistributedSamplerOptions(strategy.evaluation_replicas(), strategy.evaluation_replica())
            .shuffle(false)
            .pad(false));
  }
  Loaders loaders{
      data::DataLoader(d.train,
                       data::DataLoaderOptions(c.batch_size).shuffle(true).drop_last(true).seed(
                           c.seed).pin_memory(device.is_cuda()),
                       make_transform(c, c.augment == 1), train_sampler),
      // A GPT's logits are [B, T, vocab] (16 x 64 x 50,304 f32: 206 MB): its evaluation batches
      // are its training batches.
      data::DataLoader(d.test, data::DataLoaderOptions(c.data == "text" ? c.batch_size : 1000),
                       make_transform(c, false), test_sampler)};
  // The same on every rank: exit code 2 everywhere (main.cc).
  if (c.data == "text" && d.test->size() == 0) {
    throw FlagError("the validation text makes no window of --seq-len=" +
                    std::to_string(c.seq_len) + " tokens: use a longer text or a shorter window");
  }
  if (loaders.train.num_batches() == 0) {
    throw FlagError(std::to_string(d.train->size()) + " training examples make no batch of " +
                    std::to_string(c.batch_size) + " on each of " + std::to_string(replicas) +
                    " data-parallel replicas: lower --batch-size or use more examples");
  }
  return loaders;
}

}  // namespace train
}  // namespace tessera
