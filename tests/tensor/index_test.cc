// cat/stack/split/chunk, index_select, gather, scatter_add, one_hot.
#include <gtest/gtest.h>

#include "tensor/ops.h"

namespace tessera {
namespace {

TEST(Index, CatStackSplit) {
  Tensor a = from_vector<float>({1, 2, 3, 4}, {2, 2});
  Tensor b = from_vector<float>({5, 6}, {1, 2});
  EXPECT_EQ(cat({a, b}, 0).to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(cat({a, a}, 1).to_vector<float>(), (std::vector<float>{1, 2, 1, 2, 3, 4, 3, 4}));
  EXPECT_THROW(cat({a, b}, 1), Error);
  Tensor s = stack({b.squeeze(0), b.squeeze(0)}, 1);
  EXPECT_EQ(s.shape(), (Shape{2, 2}));
  EXPECT_EQ(s.to_vector<float>(), (std::vector<float>{5, 5, 6, 6}));
  std::vector<Tensor> parts = split(arange(0, 7, 1, kF32), 3, 0);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[2].to_vector<float>(), (std::vector<float>{6}));
  EXPECT_EQ(chunk(arange(0, 6, 1, kF32), 3, 0)[1].to_vector<float>(),
            (std::vector<float>{2, 3}));
  EXPECT_EQ(split(arange(0, 6, 1, kF32), std::vector<int64_t>{1, 5}, 0)[1].numel(), 5);
}

TEST(Index, IndexSelectGatherScatterAdd) {
  Tensor t = arange(0, 12, 1, kF32).view({3, 4});
  Tensor idx = from_vector<int64_t>({2, 0}, {2});
  EXPECT_EQ(index_select(t, 0, idx).to_vector<float>(),
            (std::vector<float>{8, 9, 10, 11, 0, 1, 2, 3}));
  EXPECT_EQ(index_select(t, 1, idx).to_vector<float>(), (std::vector<float>{2, 0, 6, 4, 10, 8}));
  Tensor labels = from_vector<int64_t>({3, 0, 1}, {3, 1});
  EXPECT_EQ(gather(t, 1, labels).to_vector<float>(), (std::vector<float>{3, 4, 9}));
  Tensor acc = scatter_add(zeros({3, 4}), 1, labels, ones({3, 1}));
  EXPECT_EQ(acc.to_vector<float>(), (std::vector<float>{0, 0, 0, 1, 1, 0, 0, 0, 0, 1, 0, 0}));
  // Repeated indices accumulate.
  Tensor rep = scatter_add(zeros({4}), 0, from_vector<int64_t>({1, 1, 3}, {3}), ones({3}));
  EXPECT_EQ(rep.to_vector<float>(), (std::vector<float>{0, 2, 0, 1}));
  EXPECT_THROW(index_select(t, 0, from_vector<int64_t>({3}, {1})), Error);
  EXPECT_THROW(gather(t, 1, from_vector<int64_t>({-1, 0, 0}, {3, 1})), Error);
}

TEST(Index, OneHot) {
  Tensor oh = one_hot(from_vector<int64_t>({2, 0}, {2}), 3);
  EXPECT_EQ(oh.to_vector<float>(), (std::vector<float>{0, 0, 1, 1, 0, 0}));
  EXPECT_THROW(one_hot(from_vector<int64_t>({3}, {1}), 3), Error);
}

}  // namespace
}  // namespace tessera
