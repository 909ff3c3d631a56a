// Seeded random tensors: reproducible, independent of the thread count, right moments.
#include <gtest/gtest.h>

#include <cmath>

#include "tensor/ops.h"
#include "tensor/parallel.h"

namespace tessera {
namespace {

TEST(Random, SameSeedSameStream) {
  Generator g1(42), g2(42), g3(43);
  EXPECT_EQ(rand({100}, {}, &g1).to_vector<float>(), rand({100}, {}, &g2).to_vector<float>());
  EXPECT_NE(rand({100}, {}, &g1).to_vector<float>(), rand({100}, {}, &g3).to_vector<float>());
  // Consecutive draws differ (the generator advances).
  Generator g(7);
  EXPECT_NE(randn({10}, {}, &g).to_vector<float>(), randn({10}, {}, &g).to_vector<float>());
}

TEST(Random, StateSaveAndRestoreReplays) {
  Generator g(5);
  randn({3}, {}, &g);
  const GeneratorState s = g.state();
  const std::vector<float> first = rand({50}, {}, &g).to_vector<float>();
  g.set_state(s);
  EXPECT_EQ(rand({50}, {}, &g).to_vector<float>(), first);
}

TEST(Random, IndependentOfThreadCount) {
  const int before = num_threads();
  set_num_threads(1);
  Generator a(9);
  const std::vector<float> one = randn({100000}, {}, &a).to_vector<float>();
  set_num_threads(2);
  Generator b(9);
  const std::vector<float> two = randn({100000}, {}, &b).to_vector<float>();
  set_num_threads(before);
  EXPECT_EQ(one, two);
}

TEST(Random, Moments) {
  Generator g(1);
  const int64_t n = 200000;
  Tensor u = uniform({n}, -1, 3, kF64, &g);
  EXPECT_NEAR(mean(u).item(), 1.0, 0.02);
  EXPECT_NEAR(var(u).item(), 16.0 / 12, 0.02);
  EXPECT_GE(amin(u).item(), -1.0);
  EXPECT_LT(amax(u).item(), 3.0);
  Tensor z = normal({n}, 2, 0.5, {}, &g);
  EXPECT_NEAR(mean(z).item(), 2.0, 0.01);
  EXPECT_NEAR(std::sqrt(var(z).item()), 0.5, 0.01);
  Tensor b = bernoulli({n}, 0.3, {}, &g);
  EXPECT_NEAR(mean(b).item(), 0.3, 0.01);
  EXPECT_EQ(sum(eq(b, 0.0)).item() + sum(eq(b, 1.0)).item(), n);
}

TEST(Random, DefaultGeneratorIsSeedable) {
  manual_seed(123);
  const std::vector<float> a = rand({5}).to_vector<float>();
  manual_seed(123);
  EXPECT_EQ(rand({5}).to_vector<float>(), a);
}

}  // namespace
}  // namespace tessera
