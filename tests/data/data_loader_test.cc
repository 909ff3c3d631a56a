// DataLoader: order and determinism, drop_last, prefetch equals synchronous loading, one batch
// on its own equals the epoch's, worker
// exceptions reach the caller, leaving early does not hang; samplers and transforms.
#include "data/data_loader.h"
#include "data/distributed_sampler.h"
#include "data/mnist_dataset.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "tensor/accelerator.h"
#include "tensor/ops.h"

namespace tessera {
namespace data {
namespace {

std::shared_ptr<TensorDataset> numbers(int64_t n) {
  return std::make_shared<TensorDataset>(arange(0, n, 1, kF32).view({n, 1}), arange(n, kI64));
}

std::vector<int64_t> visit(const DataLoader& loader, int64_t epoch) {
  std::vector<int64_t> seen;
  for (Batch& b : loader.epoch(epoch)) {
    for (int64_t v : b.targets.to_vector<int64_t>()) seen.push_back(v);
  }
  return seen;
}

// With a GPU the batches arrive pinned, values unchanged; without one the worker's error (the
// runtime's reason) reaches the caller instead of a crash.
TEST(DataLoader, PinMemoryPinsBatchesOrSaysWhyNot) {
  DataLoader loader(numbers(10), DataLoaderOptions(4).pin_memory(true));
  if (!cuda_is_available()) {
    try {
      visit(loader, 0);
      FAIL() << "expected an error without CUDA";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("CUDA"), std::string::npos) << e.what();
    }
    return;
  }
  for (Batch& b : loader.epoch(0)) {
    EXPECT_TRUE(b.inputs.is_pinned());
    EXPECT_TRUE(b.targets.is_pinned());
  }
  EXPECT_EQ(visit(loader, 0), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

TEST(DataLoader, SequentialBatchesAndDropLast) {
  DataLoader keep(numbers(10), DataLoaderOptions(4));
  EXPECT_EQ(keep.num_batches(), 3);
  EXPECT_EQ(visit(keep, 0), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  DataLoader drop(numbers(10), DataLoaderOptions(4).drop_last(true));
  EXPECT_EQ(drop.num_batches(), 2);
  EXPECT_EQ(visit(drop, 0).size(), 8u);
}

TEST(DataLoader, ShuffleIsAPermutationFixedBySeedAndEpoch) {
  DataLoader a(numbers(100), DataLoaderOptions(7).shuffle(true).seed(3));
  DataLoader b(numbers(100), DataLoaderOptions(7).shuffle(true).seed(3).prefetch(0));
  DataLoader c(numbers(100), DataLoaderOptions(7).shuffle(true).seed(4));
  const std::vector<int64_t> e0 = visit(a, 0);
  std::vector<int64_t> sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, visit(DataLoader(numbers(100), DataLoaderOptions(100)), 0));
  EXPECT_EQ(e0, visit(b, 0));       // prefetching changes nothing
  EXPECT_EQ(e0, visit(a, 0));       // same epoch, same order
  EXPECT_NE(e0, visit(a, 1));       // next epoch reshuffles
  EXPECT_NE(e0, visit(c, 0));       // another seed
}

TEST(DataLoader, TransformsAreSeededPerBatch) {
  auto noisy = [](Batch batch, Generator& gen) {
    batch.inputs = add(batch.inputs, rand(batch.inputs.shape(), {}, &gen));
    return batch;
  };
  DataLoader a(numbers(20), DataLoaderOptions(5).seed(1), noisy);
  DataLoader b(numbers(20), DataLoaderOptions(5).seed(1).prefetch(0), noisy);
  auto inputs = [](const DataLoader& l) {
    std::vector<float> all;
    for (Batch& batch : l.epoch(2)) {
      for (float v : batch.inputs.to_vector<float>()) all.push_back(v);
    }
    return all;
  };
  EXPECT_EQ(inputs(a), inputs(b));
}

// batch(e, b): the b-th batch of epoch(e), inputs (with a seeded transform) and targets, in any
// order of asking and across epochs; a batch number past the epoch names both.
TEST(DataLoader, OneBatchOnItsOwnEqualsTheSameBatchOfTheEpoch) {
  auto noisy = [](Batch batch, Generator& gen) {
    batch.inputs = add(batch.inputs, rand(batch.inputs.shape(), {}, &gen));
    return batch;
  };
  DataLoader loader(numbers(23), DataLoaderOptions(5).shuffle(true).seed(8).drop_last(true), noisy);
  for (int64_t e : {1, 0, 1}) {
    std::vector<Batch> walked;
    for (Batch& b : loader.epoch(e)) walked.push_back(b);
    ASSERT_EQ(walked.size(), 4u);
    for (int64_t b : {3, 0, 2, 1}) {
      const Batch one = loader.batch(e, b);
      EXPECT_EQ(one.targets.to_vector<int64_t>(), walked[b].targets.to_vector<int64_t>());
      EXPECT_EQ(one.inputs.to_vector<float>(), walked[b].inputs.to_vector<float>());
    }
  }
  try {
    loader.batch(0, 4);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("batch 4 of epoch 0, but an epoch has 4 batches"),
              std::string::npos) << e.what();
  }
}

// A sampler without a positional nullptr transform: the same batches.
TEST(DataLoader, ASamplerWithoutATransform) {
  auto sampler = std::make_shared<DistributedSampler>(10, DistributedSamplerOptions(2, 1).seed(4));
  DataLoader with(numbers(10), DataLoaderOptions(2), sampler);
  DataLoader positional(numbers(10), DataLoaderOptions(2), nullptr, sampler);
  EXPECT_EQ(visit(with, 3), visit(positional, 3));
  EXPECT_EQ(visit(with, 3).size(), 5u);
}

class Failing : public Dataset {
 public:
  int64_t size() const override { return 100; }
  Batch get_batch(const std::vector<int64_t>& indices) const override {
    TS_CHECK(indices[0] < 30, "Failing: example ", indices[0], " is unreadable");
    return {zeros({static_cast<int64_t>(indices.size()), 1}), zeros({1}, kI64)};
  }
};

TEST(DataLoader, WorkerExceptionsReachTheCaller) {
  DataLoader loader(std::make_shared<Failing>(), DataLoaderOptions(10).prefetch(2));
  int batches = 0;
  try {
    for (Batch& b : loader.epoch(0)) {
      (void)b;
      ++batches;
    }
    FAIL() << "expected the worker's error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("example 30 is unreadable"), std::string::npos);
  }
  EXPECT_EQ(batches, 3);
}

TEST(DataLoader, LeavingAnEpochEarlyStopsTheWorker) {
  DataLoader loader(numbers(1000), DataLoaderOptions(1).prefetch(4));
  for (Batch& b : loader.epoch(0)) {
    (void)b;
    break;  // the Epoch's destructor must stop and join the worker
  }
  SUCCEED();
}

TEST(Sampler, RandomPermutationIsDeterministicAndComplete) {
  const std::vector<int64_t> p = random_permutation(1000, 42);
  EXPECT_EQ(p, random_permutation(1000, 42));
  EXPECT_EQ(std::set<int64_t>(p.begin(), p.end()).size(), 1000u);
  EXPECT_NE(p, random_permutation(1000, 43));
}

TEST(Transforms, CropFlipNormalize) {
  Generator gen(1);
  const Tensor img = arange(0, 2 * 9, 1, kF32).view({2, 1, 3, 3});
  const Tensor cropped = random_crop(img, 1, gen);
  EXPECT_EQ(cropped.shape(), img.shape());
  // Every crop is a 3x3 window of the zero-padded 5x5 image: its values are image values or 0.
  for (float v : cropped.to_vector<float>()) EXPECT_TRUE(v == 0 || (v >= 0 && v < 18));
  const Tensor flipped = random_horizontal_flip(img, 1.0, gen);
  EXPECT_EQ(flipped.at({0, 0, 0, 0}), 2);
  EXPECT_EQ(flipped.at({1, 0, 2, 2}), 15);
  EXPECT_EQ(max_abs_diff(random_horizontal_flip(img, 0.0, gen), img), 0);
  const Tensor n = normalize(img, {1.0}, {2.0});
  EXPECT_EQ(n.at({0, 0, 0, 1}), 0);
  EXPECT_THROW(normalize(img, {1.0, 2.0}, {1.0, 1.0}), Error);
}

TEST(Transforms, FactoriesComposeWithoutAGeneratorArgument) {
  // The composed factories equal the functions applied by hand with the same generator.
  const Tensor u8 = arange(0, 2 * 16, 1, kF32).view({2, 1, 4, 4}).to(kU8);
  const Transform t = compose({transforms::to_float(), transforms::normalize({0.5}, {0.25}),
                               transforms::random_crop(1), transforms::random_horizontal_flip(0.5),
                               transforms::map_inputs([](const Tensor& x) { return mul(x, 2.0); })});
  Generator g1(7), g2(7);
  const Batch out = t(Batch{u8, arange(2, kI64)}, g1);
  Tensor expected = normalize(to_float(u8), {0.5}, {0.25});
  expected = random_horizontal_flip(random_crop(expected, 1, g2), 0.5, g2);
  EXPECT_EQ(max_abs_diff(out.inputs, mul(expected, 2.0)), 0);
  EXPECT_EQ(out.targets.to_vector<int64_t>(), (std::vector<int64_t>{0, 1}));
  EXPECT_THROW(transforms::random_crop(-1), Error);
  EXPECT_THROW(transforms::random_horizontal_flip(1.5), Error);
}

TEST(FashionMNISTDataset, YieldsNormalizedFloatImagesBySplitName) {
  const FashionMNISTDataset test("test", kFashionMnistRoot, 100);
  EXPECT_EQ(test.size(), 100);
  const Batch b = test.get_batch({0, 5, 99});
  EXPECT_EQ(b.inputs.dtype(), kF32);
  EXPECT_EQ(b.inputs.shape(), (Shape{3, 1, 28, 28}));
  EXPECT_EQ(b.targets.dtype(), kI64);
  const Tensor by_hand = normalize(to_float(test.images().images.narrow(0, 5, 1)),
                                   kFashionMnistMean, kFashionMnistStd);
  EXPECT_LT(max_abs_diff(b.inputs.narrow(0, 1, 1), by_hand), 1e-6);
  EXPECT_EQ(b.targets.at({1}), test.images().labels.at({5}));
  EXPECT_EQ(FashionMNISTDataset("train").size(), 60000);
  try {
    FashionMNISTDataset("validation");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("\"validation\""), std::string::npos) << e.what();
  }
}

TEST(SyntheticImages, DeterministicPerIndex) {
  SyntheticImages a(100, 3, 8, 8, 10, 7);
  const Batch x = a.get_batch({5, 17});
  const Batch y = a.get_batch({17});
  EXPECT_EQ(x.inputs.select(0, 1).to_vector<float>(), y.inputs.select(0, 0).to_vector<float>());
  EXPECT_EQ(x.targets.at({1}), y.targets.at({0}));
  EXPECT_THROW(a.get_batch({100}), Error);
}

}  // namespace
}  // namespace data
}  // namespace tessera

namespace tessera {
namespace data {
namespace {

TEST(DistributedSampler, ShardsCoverTheEpochWithPaddingOrDropLast) {
  // 10 examples on 4 ranks: padded to 12 (two repeats), each rank 3.
  std::vector<int64_t> all;
  for (int r = 0; r < 4; ++r) {
    DistributedSampler s(10, DistributedSamplerOptions(4, r).seed(5));
    EXPECT_EQ(s.size(), 3);
    const std::vector<int64_t> mine = s.indices(2);
    EXPECT_EQ(static_cast<int64_t>(mine.size()), s.size());
    all.insert(all.end(), mine.begin(), mine.end());
  }
  std::set<int64_t> distinct(all.begin(), all.end());
  EXPECT_EQ(distinct.size(), 10u);  // every example, two of them twice
  EXPECT_EQ(all.size(), 12u);
  // The same epoch order on every rank: rank r takes positions r, r+4, ... of one permutation.
  const std::vector<int64_t> order = random_permutation(10, 5 * 1000003ull + 2);
  using Options = DistributedSamplerOptions;
  const DistributedSampler shuffled(10, Options(4, 1).seed(5));
  EXPECT_EQ(shuffled.indices(2), (std::vector<int64_t>{order[1], order[5], order[9]}));
  EXPECT_NE(shuffled.indices(3), shuffled.indices(2));  // set_epoch reshuffles
  // drop_last: 8 examples used, 2 each.
  EXPECT_EQ(DistributedSampler(10, Options(4, 3).shuffle(false).drop_last(true)).indices(0),
            (std::vector<int64_t>{3, 7}));
  // Uneven shards for evaluation: each example exactly once.
  EXPECT_EQ(DistributedSampler(10, Options(4, 1).shuffle(false).pad(false)).indices(0),
            (std::vector<int64_t>{1, 5, 9}));
  EXPECT_EQ(DistributedSampler(10, Options(4, 3).shuffle(false).pad(false)).indices(0),
            (std::vector<int64_t>{3, 7}));
  EXPECT_THROW(DistributedSampler(10, DistributedSamplerOptions(4, 4)), Error);
}

}  // namespace
}  // namespace data
}  // namespace tessera
