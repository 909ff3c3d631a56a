// Gradcheck (f64 finite differences) for every differentiable elementwise op and reduction,
// including broadcasting and non-contiguous inputs.
#include <gtest/gtest.h>

#include "autograd/functions.h"
#include "tests/autograd/gradcheck_util.h"
#include "tensor/ops.h"

namespace tessera {
namespace {

TEST(Gradcheck, BinaryOpsWithBroadcasting) {
  const std::vector<Tensor> in = {r({3, 4}, 1), r({4}, 2)};
  EXPECT_GRADCHECK([](const V& v) { return add(v[0], v[1]); }, in);
  EXPECT_GRADCHECK([](const V& v) { return sub(v[0], v[1]); }, in);
  EXPECT_GRADCHECK([](const V& v) { return mul(v[0], v[1]); }, in);
  EXPECT_GRADCHECK([](const V& v) { return div(v[0], v[1]); },
                   std::vector<Tensor>{r({3, 4}, 1), positive({3, 1}, 2)});
  EXPECT_GRADCHECK([](const V& v) { return maximum(v[0], v[1]); }, in);
  EXPECT_GRADCHECK([](const V& v) { return minimum(v[0], v[1]); }, in);
}

TEST(Gradcheck, ScalarOperands) {
  const std::vector<Tensor> in = {positive({2, 3}, 3)};
  EXPECT_GRADCHECK([](const V& v) { return v[0] * 3.0 + 1.0; }, in);
  EXPECT_GRADCHECK([](const V& v) { return 2.0 - v[0] / 4.0; }, in);
  EXPECT_GRADCHECK([](const V& v) { return 1.0 / v[0]; }, in);
  EXPECT_GRADCHECK([](const V& v) { return pow(v[0], 3.0); }, in);
  EXPECT_GRADCHECK([](const V& v) { return pow(v[0], -0.5); }, in);
}

TEST(Gradcheck, UnaryOps) {
  const std::vector<Tensor> any = {r({2, 5}, 4)};
  const std::vector<Tensor> pos = {positive({2, 5}, 5)};
  EXPECT_GRADCHECK([](const V& v) { return neg(v[0]); }, any);
  EXPECT_GRADCHECK([](const V& v) { return exp(v[0]); }, any);
  EXPECT_GRADCHECK([](const V& v) { return tanh(v[0]); }, any);
  EXPECT_GRADCHECK([](const V& v) { return sigmoid(v[0]); }, any);
  EXPECT_GRADCHECK([](const V& v) { return square(v[0]); }, any);
  EXPECT_GRADCHECK([](const V& v) { return log(v[0]); }, pos);
  EXPECT_GRADCHECK([](const V& v) { return sqrt(v[0]); }, pos);
  // Away from the kinks (|x| >= 0.5 here), abs/relu/clamp are smooth.
  const std::vector<Tensor> away = {mul(positive({2, 5}, 6), sign(r({2, 5}, 7)))};
  EXPECT_GRADCHECK([](const V& v) { return abs(v[0]); }, away);
  EXPECT_GRADCHECK([](const V& v) { return relu(v[0]); }, away);
  EXPECT_GRADCHECK([](const V& v) { return clamp(v[0], -1.0, 1.0); },
                   std::vector<Tensor>{from_vector<double>({-3, -0.5, 0.2, 0.9, 2}, {5})});
}

TEST(Gradcheck, Where) {
  const Tensor cond = gt(r({3, 3}, 8), 0.0);
  EXPECT_GRADCHECK([cond](const V& v) { return where(cond, v[0], v[1]); },
                   std::vector<Tensor>{r({3, 3}, 9), r({3}, 10)});
}

TEST(Gradcheck, NonContiguousInputs) {
  // A transposed view and a strided slice as inputs.
  const Tensor t = r({4, 3}, 11).t();
  const Tensor s = r({3, 8}, 12).slice(1, 0, 8, 2);
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_GRADCHECK([](const V& v) { return mul(exp(v[0]), v[1]); }, std::vector<Tensor>{t, s});
}

TEST(Gradcheck, Reductions) {
  const std::vector<Tensor> in = {r({3, 4, 2}, 13)};
  EXPECT_GRADCHECK([](const V& v) { return sum(v[0]); }, in);
  EXPECT_GRADCHECK([](const V& v) { return sum(v[0], {1}); }, in);
  EXPECT_GRADCHECK([](const V& v) { return sum(v[0], {0, 2}, true); }, in);
  EXPECT_GRADCHECK([](const V& v) { return mean(v[0], {-1}); }, in);
  EXPECT_GRADCHECK([](const V& v) { return mean(v[0]); }, in);
  EXPECT_GRADCHECK([](const V& v) { return var(v[0], {1}); }, in);
  EXPECT_GRADCHECK([](const V& v) { return var(v[0], {}, 0, true); }, in);
  EXPECT_GRADCHECK([](const V& v) { return amax(v[0], {1}); }, in);
  EXPECT_GRADCHECK([](const V& v) { return amin(v[0], {0, 2}); }, in);
}

TEST(Autograd, AmaxSplitsGradientAmongTies) {
  Variable x(from_vector<double>({1, 3, 3, 2}, {4}), true);
  amax(x).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0, 0.5, 0.5, 0}));
}

}  // namespace
}  // namespace tessera
