// Inputs and an assertion shared by the gradcheck suites.
#pragma once

#include <gtest/gtest.h>

#include <vector>

#include "autograd/gradcheck.h"
#include "tensor/ops.h"

namespace tessera {

using V = std::vector<Variable>;

// f64 N(0, 1) values from their own seed.
inline Tensor r(const Shape& shape, uint64_t seed) {
  Generator g(seed);
  return randn(shape, kF64, &g);
}

// f64 values in [0.5, 2]: safe for log, sqrt and division.
inline Tensor positive(const Shape& shape, uint64_t seed) {
  Generator g(seed);
  return uniform(shape, 0.5, 2.0, kF64, &g);
}

}  // namespace tessera

#define EXPECT_GRADCHECK(fn, ...)                           \
  do {                                                      \
    const GradcheckResult res = gradcheck(fn, __VA_ARGS__); \
    EXPECT_TRUE(res.ok) << res.message;                     \
  } while (0)
