#include "tensor/cpu/conv_path.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace tessera {
namespace cpu {

namespace {

enum class Forced { kNone, kOwn, kOneDnn };

Forced forced() {
  static const Forced f = [] {
    const char* s = std::getenv("TESSERA_CONV");
    if (s == nullptr) return Forced::kNone;
    if (std::strcmp(s, "own") == 0) return Forced::kOwn;
    if (std::strcmp(s, "onednn") == 0) return Forced::kOneDnn;
    return Forced::kNone;
  }();
  return f;
}

}  // namespace

bool conv_uses_onednn(ConvPass pass, const Shape& input, const Shape& weight,
                      const Conv2dParams& p) {
  switch (forced()) {
    case Forced::kOwn: return false;
    case Forced::kOneDnn: return true;
    case Forced::kNone: break;
  }
  if (p.groups != 1 || p.dilation[0] != 1 || p.dilation[1] != 1) return false;
  const int64_t c = input[1], k = weight[0], kh = weight[2], kw = weight[3];
  const int64_t out_h = window_output_size(input[2], kh, p.stride[0], p.padding[0], 1);
  const int64_t out_w = window_output_size(input[3], kw, p.stride[1], p.padding[1], 1);
  if (kh == 1 && kw == 1) {
    // 1x1: im2col is a copy and OpenBLAS's packing another; oneDNN's 1x1 kernels run the
    // channel-blocked GEMM straight from the reordered maps (0.55-0.8x our time at 128-2048
    // channels; level at 64 channels, where we keep ours).
    return std::max(c, k) >= 128;
  }
  if (kh == 3 && kw == 3) {
    // Our direct kernels hold 16 positions x 16 channels per tile, sized for 16-128 channels
    // on maps of 28x28 and more (ResNet-20, ResNet-18/50's first stages), where they match or
    // beat oneDNN in every pass. With 128 channels and more on maps of 14x14 and less, oneDNN's
    // forward and input gradient ran in 0.56-0.85x our time; our weight gradient stayed level.
    return pass != ConvPass::kBackwardWeight && std::min(c, k) >= 128 && out_h * out_w <= 196;
  }
  // Larger kernels (the 7x7/2 stem): oneDNN's direct kernels instead of im2col + GEMM, 0.65x.
  return kh * kw > 9;
}

}  // namespace cpu
}  // namespace tessera
