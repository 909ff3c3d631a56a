#include "pipeline/tensor_header.h"

#include <gtest/gtest.h>

#include <vector>

#include "tensor/ops.h"

namespace tessera {
namespace pipeline {
namespace {

TEST(TensorHeader, ShapeAndDtypeRoundTripAndUnusedSizesStayZero) {
  std::vector<int64_t> h(kTensorHeaderLength, -7);
  write_tensor_header(zeros({3, 1, 28, 28}, kBF16), h.data());
  ASSERT_TRUE(is_tensor_header(h.data()));
  EXPECT_EQ(tensor_header_dtype(h.data()), kBF16);
  EXPECT_EQ(tensor_header_shape(h.data()), (Shape{3, 1, 28, 28}));
  EXPECT_EQ(h, (std::vector<int64_t>{static_cast<int64_t>(kBF16), 4, 3, 1, 28, 28, 0, 0, 0, 0}));
}

TEST(TensorHeader, AScalarAndEightDimensionsFit) {
  std::vector<int64_t> h(kTensorHeaderLength);
  write_tensor_header(zeros({}, kI64), h.data());
  EXPECT_EQ(tensor_header_shape(h.data()), Shape{});
  write_tensor_header(zeros({1, 2, 1, 2, 1, 2, 1, 2}, kF32), h.data());
  EXPECT_EQ(tensor_header_shape(h.data()), (Shape{1, 2, 1, 2, 1, 2, 1, 2}));
}

TEST(TensorHeader, ValuesNoSenderWritesAreNotAHeader) {
  std::vector<int64_t> h(kTensorHeaderLength);
  write_tensor_header(zeros({2}, kF32), h.data());
  for (int64_t ndim : {-1, 9}) {
    std::vector<int64_t> bad = h;
    bad[kTensorHeaderNdim] = ndim;
    EXPECT_FALSE(is_tensor_header(bad.data())) << ndim << " dimensions";
  }
  for (int64_t dtype : {int64_t{-1}, static_cast<int64_t>(kBool) + 1}) {
    std::vector<int64_t> bad = h;
    bad[kTensorHeaderDType] = dtype;
    EXPECT_FALSE(is_tensor_header(bad.data())) << "dtype " << dtype;
  }
}

}  // namespace
}  // namespace pipeline
}  // namespace tessera
