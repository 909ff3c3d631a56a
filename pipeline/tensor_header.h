// A tensor's dtype and shape as i64 values, sent ahead of its elements so that the receiver can
// check what arrives (p2p.cc, inside each message's header) or allocate for it (Pipe::forward,
// whose last stage broadcasts the output):
//
//   [ dtype | ndim | size 0 | size 1 | ... | size 7 ]     kTensorHeaderLength = 10 x i64
//
// Sizes past ndim stay 0. A header read off the wire is checked (is_tensor_header) before its
// shape is trusted.
#pragma once

#include <cstdint>

#include "tensor/tensor.h"

namespace tessera {
namespace pipeline {

constexpr int kTensorHeaderMaxDims = 8;
// Where each field sits, and the length.
constexpr int kTensorHeaderDType = 0, kTensorHeaderNdim = 1, kTensorHeaderSizes = 2;
constexpr int64_t kTensorHeaderLength = kTensorHeaderSizes + kTensorHeaderMaxDims;

// Writes `tensor`'s dtype and shape to h[0, kTensorHeaderLength). The caller checks that it has
// at most kTensorHeaderMaxDims dimensions, so that its error can say who was sending what.
void write_tensor_header(const Tensor& tensor, int64_t* h);

// Whether h holds a dtype and a dimension count that write_tensor_header could have written.
bool is_tensor_header(const int64_t* h);

DType tensor_header_dtype(const int64_t* h);
Shape tensor_header_shape(const int64_t* h);

}  // namespace pipeline
}  // namespace tessera
