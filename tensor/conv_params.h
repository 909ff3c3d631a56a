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
  // Run on channels-last activations (tensor.h's MemoryFormat) where the backend has such
  // kernels: the input converted to NHWC if it is not, the output and the input's gradient
  // NHWC (PyTorch: a channels_last weight). An NHWC input alone also asks for it.
  bool channels_last = false;
  // Run on channels-blocked activations (nChw16c, tensor.h's MemoryFormat) where the backend has
  // such kernels: every activation with a multiple of 16 channels converted to it if it is not,
  // the output and the input's gradient so too. A channels-blocked input alone also asks for it.
  bool channels_blocked = false;
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
