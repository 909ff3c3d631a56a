#include "tensor/cpu/conv_path.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "tensor/accelerator.h"
#include "tensor/cpu/conv_onednn.h"

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

bool conv_uses_winograd(const Shape& input, const Shape& weight, const Conv2dParams& p) {
  if (forced() == Forced::kOwn || !allow_winograd()) return false;
  if (p.groups != 1 || p.dilation[0] != 1 || p.dilation[1] != 1) return false;
  if (weight[2] != 3 || weight[3] != 3 || p.stride[0] != 1 || p.stride[1] != 1) return false;
  if (p.padding[0] > 1 || p.padding[1] > 1) return false;
  const int64_t c = input[1], k = weight[0];
  const int64_t out_h = window_output_size(input[2], 3, 1, p.padding[0], 1);
  const int64_t out_w = window_output_size(input[3], 3, 1, p.padding[1], 1);
  // One thread, the three passes' sum, against oneDNN's direct kernels (tessera's own were
  // level with those): 64 channels at 56x56 0.50x, 128 at 28x28 0.38x, 256 at 14x14 0.68x, and
  // ResNet-20's 32 at 16x16 and 64 at 8x8 (batch 128) 0.70x and 0.58x; slower at 16 channels
  // (1.15x at 32x32) and at 512 channels on 7x7 (1.28x). docs/BENCHMARKS.md.
  const bool shape = c % 16 == 0 && k % 16 == 0 && std::min(c, k) >= 32 &&
                     std::max(c, k) <= 256 && out_h >= 8 && out_w >= 8;
  return shape && onednn_winograd_available();
}

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
    // 1x1 at stride 1 on maps of 14x14 and less with 128+ channels: oneDNN's channel-blocked
    // GEMM ran in 0.66-0.98x the time of im2col (a copy) + OpenBLAS (one thread, CPU time).
    // On 28x28 the two were level; on 56x56, and for every strided projection, ours was
    // 1.05-1.37x faster.
    return p.stride[0] == 1 && p.stride[1] == 1 && out_h * out_w <= 196 && std::max(c, k) >= 128;
  }
  if (kh == 3 && kw == 3) {
    // Our direct kernels hold 16 positions x 16 channels per tile, sized for 16-128 channels
    // on maps of 28x28 and more (ResNet-20, ResNet-18/50's first stages), where they match or
    // beat oneDNN in every pass. With 128 channels and more on outputs of 14x14 and less,
    // oneDNN's forward and input gradient ran in 0.54-0.89x our time on an AMD EPYC, where the
    // weight gradients were level; on an Intel Xeon with AMX oneDNN's weight gradients there
    // ran in 0.78-0.90x ours (ResNet-18 at batch 8: 512 channels at 7x7 11.9 against 13.7 ms,
    // 256->512 at stride 2 7.1 against 8.9), so every pass goes to oneDNN. At stride 2 with
    // 128+ channels oneDNN is ahead on larger maps too on that Xeon: ResNet-50's 128->128 on
    // 56x56 took 41-48 ms for its three passes against our 51-54 (three alternating runs); at
    // 64->128 (ResNet-18) the two were level, so it stays ours.
    const bool strided = p.stride[0] > 1 || p.stride[1] > 1;
    return std::min(c, k) >= 128 && (out_h * out_w <= 196 || strided);
  }
  // Larger kernels (the 7x7/2 stem): oneDNN's direct kernels instead of im2col + GEMM, 0.6x.
  return kh * kw > 9;
}

}  // namespace cpu
}  // namespace tessera
