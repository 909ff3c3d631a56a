// DeferredInit (tensor/deferred_init.h): a model built under it holds no bytes, and each
// parameter materialized afterwards equals, bit for bit, the same parameter of the model built
// eagerly from the same seed (the generator's counters are claimed as the eager build claims
// them). Also: the generator ends where the eager build leaves it, and using a deferred tensor's
// values is an error that names DeferredInit.
#include <gtest/gtest.h>

#include <memory>

#include "autograd/functions.h"
#include "models/gpt.h"
#include "models/resnet.h"
#include "models/simple.h"
#include "tensor/allocator.h"
#include "tensor/deferred_init.h"
#include "tensor/ops.h"
#include "tensor/random.h"
#include "tests/util/expect_error.h"

namespace tessera {
namespace {

using testing::expect_error;
using Builder = std::function<std::shared_ptr<nn::Sequential>()>;

void expect_deferred_equals_eager(const Builder& build) {
  manual_seed(17);
  const std::shared_ptr<nn::Sequential> eager = build();
  const GeneratorState after_eager = default_generator().state();

  manual_seed(17);
  const int64_t before = memory_stats(Device()).current_bytes;
  std::shared_ptr<nn::Sequential> deferred;
  {
    DeferredInit scope;
    deferred = build();
  }
  // No parameter bytes were allocated: the model's sizes, not its values.
  EXPECT_LT(memory_stats(Device()).current_bytes - before, 4096);
  EXPECT_EQ(default_generator().state().offset, after_eager.offset);

  const auto want = eager->named_parameters();
  const auto got = deferred->named_parameters();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE(got[i].first);
    ASSERT_EQ(got[i].first, want[i].first);
    ASSERT_TRUE(is_deferred(got[i].second.data()));
    materialize(got[i].second.data());
    EXPECT_FALSE(is_deferred(got[i].second.data()));
    EXPECT_TRUE(allclose(got[i].second.data(), want[i].second.data(), 0, 0));
  }
  // And buffers (BatchNorm's running statistics: constants).
  const auto want_buffers = eager->named_buffers();
  const auto got_buffers = deferred->named_buffers();
  ASSERT_EQ(got_buffers.size(), want_buffers.size());
  for (size_t i = 0; i < got_buffers.size(); ++i) {
    SCOPED_TRACE(got_buffers[i].first);
    materialize(got_buffers[i].second.data());
    EXPECT_TRUE(allclose(got_buffers[i].second.data(), want_buffers[i].second.data(), 0, 0));
  }
}

TEST(DeferredInit, GptMaterializesToTheEagerValues) {
  models::GPTConfig c = models::GPTConfig::nano(301);
  c.n_layer = 2;
  expect_deferred_equals_eager([&] { return models::GPT(c); });
}

TEST(DeferredInit, MlpAndResNetMaterializeToTheEagerValues) {
  expect_deferred_equals_eager([] { return models::MLP(13, 7, 5); });
  expect_deferred_equals_eager([] { return models::ResNet20(1, 10); });
}

TEST(DeferredInit, ValuesOfADeferredTensorAreAnError) {
  Tensor t;
  {
    DeferredInit scope;
    t = empty({3, 4}, kF32);
    EXPECT_TRUE(DeferredInit::active());
  }
  EXPECT_FALSE(DeferredInit::active());
  EXPECT_TRUE(is_deferred(t));
  expect_error([&] { add(t, t); }, "DeferredInit");
  expect_error([&] { t.narrow(0, 1, 1).fill_(2.0); }, "whole");
  // Tensors made after the scope are ordinary.
  EXPECT_FALSE(is_deferred(zeros({2}, kF32)));
  materialize(t);  // never initialized: zeros
  EXPECT_TRUE(allclose(t, zeros({3, 4}, kF32), 0, 0));
}

}  // namespace
}  // namespace tessera
