// What the CUDA-against-CPU tests share: a fixture that skips, naming the reason, when this
// binary has no CUDA backend or the machine has no GPU; tolerances per dtype (f64 ~1e-10,
// f32 ~1e-5 relative, f16/bf16 ~1e-2); and the comparison of a CUDA result with the CPU's.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "tensor/accelerator.h"
#include "tensor/ops.h"

namespace tessera {
namespace testing {

class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_is_available()) GTEST_SKIP() << "no CUDA: " << cuda_unavailable_reason();
  }
  const Device gpu = Device::cuda(0);
};

inline double tolerance(DType dtype) {
  switch (dtype) {
    case kF64: return 1e-10;
    case kF32: return 1e-5;
    default: return 1e-2;
  }
}

// Compares a CUDA result with the CPU's, in f64 on the CPU.
inline void expect_close(const Tensor& cuda_result, const Tensor& cpu_result, double rtol,
                         const std::string& what) {
  ASSERT_TRUE(cuda_result.device().is_cuda()) << what;
  ASSERT_EQ(cuda_result.shape(), cpu_result.shape()) << what;
  ASSERT_EQ(cuda_result.dtype(), cpu_result.dtype()) << what;
  const Tensor a = cuda_result.cpu().to(kF64), b = cpu_result.to(kF64);
  EXPECT_TRUE(allclose(a, b, rtol, rtol)) << what << ": max |diff| = "
                                         << amax(abs(a - b)).item();
}

inline Tensor random_cpu(const Shape& shape, DType dtype, uint64_t seed, double low = -2,
                         double high = 2) {
  Generator gen(seed);
  return uniform(shape, low, high, kF64, &gen).to(dtype);
}

inline constexpr DType kFloatTypes[] = {kF32, kF64, kF16, kBF16};

}  // namespace testing
}  // namespace tessera
