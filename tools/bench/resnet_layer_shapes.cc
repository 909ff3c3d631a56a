#include "tools/bench/resnet_layer_shapes.h"

namespace tessera {
namespace bench {

Layers resnet_layers(int depth) {
  Layers l;
  // A convolution and the batch norm after it: alone, + ReLU, or + residual + ReLU.
  enum Tail { kBn, kBnRelu, kBnAddRelu };
  auto conv = [&](int64_t c, int64_t k, int64_t kernel, int64_t stride, int64_t h, Tail tail) {
    const ConvShape s{c, k, kernel, stride, h};
    l.convs.push_back(s);
    if (tail == kBn) l.bns.push_back({k, s.out()});
    else l.bn_relus.push_back({k, s.out(), tail == kBnAddRelu});
    return s.out();
  };
  int64_t h = conv(3, 64, 7, 2, 224, kBnRelu);
  h = (h - 1) / 2 + 1;  // max pool 3x3/2
  int64_t channels = 64;
  const std::vector<int> blocks = depth == 18 ? std::vector<int>{2, 2, 2, 2}
                                              : std::vector<int>{3, 4, 6, 3};
  for (int stage = 0; stage < 4; ++stage) {
    const int64_t width = 64 << stage;
    for (int i = 0; i < blocks[stage]; ++i) {
      const int64_t stride = stage > 0 && i == 0 ? 2 : 1;
      int64_t out_h;
      int64_t out_c = depth == 18 ? width : 4 * width;
      if (depth == 18) {
        out_h = conv(channels, width, 3, stride, h, kBnRelu);
        conv(width, width, 3, 1, out_h, kBnAddRelu);
      } else {
        conv(channels, width, 1, 1, h, kBnRelu);
        out_h = conv(width, width, 3, stride, h, kBnRelu);
        conv(width, out_c, 1, 1, out_h, kBnAddRelu);
      }
      if (stride != 1 || channels != out_c) conv(channels, out_c, 1, stride, h, kBn);
      channels = out_c;
      h = out_h;
    }
  }
  return l;
}

}  // namespace bench
}  // namespace tessera
