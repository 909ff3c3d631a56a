// Shape arithmetic shared by every op: element counts, strides, broadcasting, dim wrapping.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

using Shape = std::vector<int64_t>;

int64_t numel(const Shape& shape);
// Row-major strides of a densely packed tensor of this shape.
Shape contiguous_strides(const Shape& shape);
// NumPy broadcasting: align trailing dims; each pair must be equal or contain a 1.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
// Wraps a possibly negative dim into [0, ndim), with an error naming the op otherwise.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);
std::string shape_str(const Shape& shape);

}  // namespace tessera
