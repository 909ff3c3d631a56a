// Window geometry of 2-D convolution and pooling, and the output size it gives.
#pragma once

#include <array>
#include <cstdint>

namespace tessera {

struct Conv2dParams {
  std::array<int64_t, 2> stride{1, 1};
  std::array<int64_t, 2> padding{0, 0};
  std::array<int64_t, 2> dilation{1, 1};
  int64_t groups = 1;
};

struct Pool2dParams {
  std::array<int64_t, 2> kernel{1, 1};
  std::array<int64_t, 2> stride{1, 1};
  std::array<int64_t, 2> padding{0, 0};
  bool count_include_pad = true;  // avg_pool2d only
};

// floor((in + 2 pad - dilation (kernel - 1) - 1) / stride) + 1
inline int64_t window_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad,
                                  int64_t dilation = 1) {
  return (in + 2 * pad - dilation * (kernel - 1) - 1) / stride + 1;
}

}  // namespace tessera
