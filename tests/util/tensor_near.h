// Seeded normal tensors and an element-wise closeness check that names the largest difference,
// for the attention tests (tests/tensor, tests/dist/context_parallel).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "tensor/ops.h"
#include "tensor/random.h"

namespace tessera {
namespace testing {

// N(0, 1) drawn in f64 from Generator(seed), then converted: the same values for every dtype.
inline Tensor seeded_normal(const Shape& shape, DType dtype, uint64_t seed) {
  Generator gen(seed);
  return randn(shape, kF64, &gen).to(dtype);
}

// |a - b| <= tol (1 + |b|) element-wise, with the same shapes; `what` names the case.
inline void expect_near(const Tensor& a, const Tensor& b, double tol, const std::string& what) {
  ASSERT_EQ(a.shape(), b.shape()) << what;
  EXPECT_TRUE(allclose(a.to(kF64), b.to(kF64), tol, tol))
      << what << ": max |diff| = " << max_abs_diff(a.to(kF64), b.to(kF64));
}

}  // namespace testing
}  // namespace tessera
