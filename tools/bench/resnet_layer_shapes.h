// The layer shapes one training step of an ImageNet-style ResNet runs (layer_bench's rows),
// listed from the architecture of models/resnet.cc rather than by walking a built model: a 7x7/2
// stem, 3x3/2 max pooling, then BasicBlocks (ResNet-18) or Bottlenecks (ResNet-50) with the
// stride on the 3x3 convolution and 1x1 projection shortcuts, on a 224 x 224 input.
#pragma once

#include <cstdint>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

namespace tessera {
namespace bench {

// One convolution shape: c -> k channels, kernel x kernel, stride, on an h x h input.
struct ConvShape {
  int64_t c, k, kernel, stride, h;
  int64_t out() const { return (h + 2 * (kernel / 2) - kernel) / stride + 1; }
  bool operator<(const ConvShape& o) const {
    return std::tie(c, k, kernel, stride, h) < std::tie(o.c, o.k, o.kernel, o.stride, o.h);
  }
};

// What one step runs besides convolutions, by shape: batch norm on [N, C, H, H], alone or
// fused with the ReLU after it (and the residual added before that ReLU).
struct MapShape {
  int64_t c, h;
  bool residual = false;
  bool operator<(const MapShape& o) const {
    return std::tie(c, h, residual) < std::tie(o.c, o.h, o.residual);
  }
};

struct Layers {
  std::vector<ConvShape> convs;    // in model order, with repeats
  std::vector<MapShape> bns;       // batch norm alone (the projection shortcuts')
  std::vector<MapShape> bn_relus;  // batch norm + ReLU (+ residual), one fused op
};

// The layers of models::ResNetImageNet(depth), depth 18 or 50.
Layers resnet_layers(int depth);

// Each distinct shape once, in model order (first appearance), with how often the step runs it.
template <typename T>
std::vector<std::pair<T, int>> counted(const std::vector<T>& v) {
  std::map<T, int> m;
  for (const T& x : v) ++m[x];
  std::vector<std::pair<T, int>> out;
  for (const T& x : v) {
    if (m.count(x) && m[x] > 0) {
      out.push_back({x, m[x]});
      m[x] = 0;
    }
  }
  return out;
}

}  // namespace bench
}  // namespace tessera
