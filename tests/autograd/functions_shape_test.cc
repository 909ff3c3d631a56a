// Gradcheck for views, shape ops, indexing, matmul and linear.
#include <gtest/gtest.h>

#include "autograd/functions.h"
#include "tests/autograd/gradcheck_util.h"
#include "tensor/ops.h"

namespace tessera {
namespace {

TEST(Gradcheck, Views) {
  const std::vector<Tensor> in = {r({2, 3, 4}, 1)};
  // Each view is followed by a non-linear op so the gradient is not uniform.
  EXPECT_GRADCHECK([](const V& v) { return exp(reshape(v[0], {6, 4})); }, in);
  EXPECT_GRADCHECK([](const V& v) { return exp(view(v[0], {4, 6})); }, in);
  EXPECT_GRADCHECK([](const V& v) { return exp(flatten(v[0], 1)); }, in);
  EXPECT_GRADCHECK([](const V& v) { return exp(transpose(v[0], 0, 2)); }, in);
  EXPECT_GRADCHECK([](const V& v) { return exp(permute(v[0], {1, 2, 0})); }, in);
  EXPECT_GRADCHECK([](const V& v) { return exp(narrow(v[0], 2, 1, 2)); }, in);
  EXPECT_GRADCHECK([](const V& v) { return exp(slice(v[0], 2, 0, 4, 3)); }, in);
  EXPECT_GRADCHECK([](const V& v) { return exp(select(v[0], 1, 2)); }, in);
  EXPECT_GRADCHECK([](const V& v) { return exp(unsqueeze(v[0], 1)); }, in);
  EXPECT_GRADCHECK([](const V& v) { return exp(squeeze(unsqueeze(v[0], 0), 0)); }, in);
  EXPECT_GRADCHECK([](const V& v) { return exp(contiguous(transpose(v[0], 0, 1))); }, in);
  EXPECT_GRADCHECK([](const V& v) { return exp(expand(v[0], {5, 2, 3, 4})); }, in);
  EXPECT_GRADCHECK([](const V& v) { return exp(to(to(v[0], kF32), kF64)); }, in,
                   GradcheckOptions{1e-3, 1e-4, 1e-3, 0});
}

TEST(Gradcheck, ViewOfView) {
  // Backward through a chain of views on a non-contiguous input.
  EXPECT_GRADCHECK([](const V& v) { return tanh(narrow(transpose(v[0], 0, 1), 0, 1, 2)); },
                   std::vector<Tensor>{r({4, 3}, 2)});
}

TEST(Gradcheck, CatStackSplit) {
  const std::vector<Tensor> in = {r({2, 3}, 3), r({2, 2}, 4)};
  EXPECT_GRADCHECK([](const V& v) { return exp(cat({v[0], v[1]}, 1)); }, in);
  EXPECT_GRADCHECK([](const V& v) { return exp(stack({v[0], v[0]}, 0)); }, in);
  EXPECT_GRADCHECK(
      [](const V& v) {
        std::vector<Variable> parts = split(v[0], 2, 1);
        return add(exp(parts[0]), sum(parts[1], {1}, true));
      },
      in);
  EXPECT_GRADCHECK([](const V& v) { return chunk(exp(v[1]), 2, 0)[1]; }, in);
}

TEST(Gradcheck, Indexing) {
  const Tensor idx = from_vector<int64_t>({2, 0, 2}, {3});  // repeats accumulate
  EXPECT_GRADCHECK([idx](const V& v) { return exp(index_select(v[0], 0, idx)); },
                   std::vector<Tensor>{r({3, 2}, 5)});
  EXPECT_GRADCHECK([idx](const V& v) { return exp(index_select(v[0], 1, idx)); },
                   std::vector<Tensor>{r({2, 3}, 6)});
  const Tensor g = from_vector<int64_t>({1, 0, 2, 2}, {4, 1});
  EXPECT_GRADCHECK([g](const V& v) { return exp(gather(v[0], 1, g)); },
                   std::vector<Tensor>{r({4, 3}, 7)});
}

TEST(Gradcheck, Matmul) {
  EXPECT_GRADCHECK([](const V& v) { return matmul(v[0], v[1]); },
                   std::vector<Tensor>{r({3, 4}, 8), r({4, 2}, 9)});
  // Batched with broadcasting, and a shared right operand.
  EXPECT_GRADCHECK([](const V& v) { return matmul(v[0], v[1]); },
                   std::vector<Tensor>{r({2, 3, 4}, 10), r({1, 4, 2}, 11)});
  EXPECT_GRADCHECK([](const V& v) { return matmul(v[0], v[1]); },
                   std::vector<Tensor>{r({2, 3, 4}, 12), r({4, 5}, 13)});
  // Vectors and transposed (non-contiguous) operands.
  EXPECT_GRADCHECK([](const V& v) { return matmul(v[0], v[1]); },
                   std::vector<Tensor>{r({4}, 14), r({4, 3}, 15).t().t()});
  EXPECT_GRADCHECK([](const V& v) { return matmul(v[0], v[1]); },
                   std::vector<Tensor>{r({4, 3}, 16).t(), r({4}, 17)});
}

TEST(Gradcheck, Linear) {
  EXPECT_GRADCHECK([](const V& v) { return linear(v[0], v[1], v[2]); },
                   std::vector<Tensor>{r({5, 4}, 18), r({3, 4}, 19), r({3}, 20)});
  EXPECT_GRADCHECK([](const V& v) { return linear(v[0], v[1], Variable()); },
                   std::vector<Tensor>{r({2, 5, 4}, 21), r({3, 4}, 22)});
}

}  // namespace
}  // namespace tessera
