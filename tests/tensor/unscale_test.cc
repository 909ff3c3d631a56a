// non_finite_check_and_unscale_ (the loss scaler's kernel) on the CPU: values unscaled by hand
// in every floating dtype, inf and NaN detected in any one gradient, found_inf only ever set,
// non-contiguous gradients written back, and bad arguments rejected.
#include "tensor/unscale.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tensor/ops.h"

namespace tessera {
namespace {

std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

TEST(Unscale, MultipliesEveryGradientByInvScale) {
  for (DType dtype : {kF32, kF64, kF16, kBF16}) {
    Tensor a = from_vector<float>({1024, -512, 3, 0}, {4}).to(dtype);
    Tensor b = from_vector<float>({64, 8}, {2, 1}).to(dtype);
    Tensor found_inf = zeros({1});
    non_finite_check_and_unscale_({a, b}, found_inf, 1.0 / 1024);
    EXPECT_EQ(values(a), (std::vector<double>{1, -0.5, 3.0 / 1024, 0})) << dtype;
    EXPECT_EQ(values(b), (std::vector<double>{0.0625, 0.0078125})) << dtype;
    EXPECT_EQ(found_inf.item(), 0.0) << dtype;
  }
}

TEST(Unscale, FindsInfAndNanInAnyOneGradient) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (DType dtype : {kF32, kF16, kBF16}) {
    for (double bad : {inf, -inf, nan}) {
      // Large enough to span several parallel blocks; the bad value near the end.
      Tensor clean = full({3, 50000}, 2.0, dtype);
      Tensor dirty = full({70000}, 4.0, dtype);
      Tensor(dirty.narrow(0, 69000, 1)).fill_(bad);
      Tensor found_inf = zeros({1});
      non_finite_check_and_unscale_({clean, dirty}, found_inf, 0.5);
      EXPECT_EQ(found_inf.item(), 1.0) << dtype << " " << bad;
      // Every gradient was still unscaled (PyTorch's kernel does the same).
      EXPECT_EQ(amax(clean).item(), 1.0);
      EXPECT_EQ(dirty.at({0}), 2.0);
    }
  }
}

TEST(Unscale, FoundInfIsOnlyEverSet) {
  Tensor g = ones({3});
  Tensor found_inf = ones({1});  // an overflow seen by an earlier call
  non_finite_check_and_unscale_({g}, found_inf, 0.25);
  EXPECT_EQ(found_inf.item(), 1.0);
  EXPECT_EQ(values(g), (std::vector<double>{0.25, 0.25, 0.25}));
}

TEST(Unscale, NonContiguousGradientsAreWrittenBack) {
  Tensor base = from_vector<float>({2, 4, 6, 8, 10, 12}, {2, 3});
  Tensor t = base.t();
  non_finite_check_and_unscale_({t, Tensor(zeros({0}))}, zeros({1}), 0.5);
  EXPECT_EQ(values(base), (std::vector<double>{1, 2, 3, 4, 5, 6}));
}

TEST(Unscale, RejectsBadArguments) {
  Tensor g = ones({2});
  EXPECT_THROW(non_finite_check_and_unscale_({g}, zeros({1}, kF64), 1), Error);
  EXPECT_THROW(non_finite_check_and_unscale_({g}, zeros({2}), 1), Error);
  EXPECT_THROW(non_finite_check_and_unscale_({ones({2}, kI64)}, zeros({1}), 1), Error);
  EXPECT_THROW(non_finite_check_and_unscale_({Tensor()}, zeros({1}), 1), Error);
}

}  // namespace
}  // namespace tessera
