#include "pipeline/tensor_header.h"

#include "tensor/check.h"

namespace tessera {
namespace pipeline {

void write_tensor_header(const Tensor& tensor, int64_t* h) {
  TS_INTERNAL_ASSERT(tensor.dim() <= kTensorHeaderMaxDims);
  for (int64_t i = 0; i < kTensorHeaderLength; ++i) h[i] = 0;
  h[kTensorHeaderDType] = static_cast<int64_t>(tensor.dtype());
  h[kTensorHeaderNdim] = tensor.dim();
  for (int64_t d = 0; d < tensor.dim(); ++d) h[kTensorHeaderSizes + d] = tensor.size(d);
}

bool is_tensor_header(const int64_t* h) {
  return h[kTensorHeaderNdim] >= 0 && h[kTensorHeaderNdim] <= kTensorHeaderMaxDims &&
         h[kTensorHeaderDType] >= 0 && h[kTensorHeaderDType] <= static_cast<int64_t>(DType::kBool);
}

DType tensor_header_dtype(const int64_t* h) {
  TS_INTERNAL_ASSERT(is_tensor_header(h));
  return static_cast<DType>(h[kTensorHeaderDType]);
}

Shape tensor_header_shape(const int64_t* h) {
  TS_INTERNAL_ASSERT(is_tensor_header(h));
  return Shape(h + kTensorHeaderSizes, h + kTensorHeaderSizes + h[kTensorHeaderNdim]);
}

}  // namespace pipeline
}  // namespace tessera
