#include "dist/compression/top_k.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "tensor/ops.h"

namespace tessera {
namespace dist {
namespace compression {

TopK::TopK(double ratio) : ratio_(ratio) {
  TS_CHECK(ratio > 0 && ratio <= 1, "TopK: ratio must be in (0, 1], got ", ratio);
}

std::string TopK::name() const { return with_ratio("topk", ratio_); }

int64_t TopK::k(int64_t n) const { return sparse_count(ratio_, n); }

Tensor TopK::compress(const Tensor& x_in, const CompressContext&) {
  const Tensor x = x_in.contiguous();
  const int64_t n = x.numel(), kk = k(n);
  const float* v = x.data<float>();
  std::vector<int32_t> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  auto larger = [v](int32_t a, int32_t b) {
    const float ma = std::fabs(v[a]), mb = std::fabs(v[b]);
    return ma > mb || (ma == mb && a < b);
  };
  std::nth_element(idx.begin(), idx.begin() + (kk - 1), idx.end(), larger);
  idx.resize(static_cast<size_t>(kk));
  std::sort(idx.begin(), idx.end());
  Tensor message = empty({8 * kk}, kU8);
  uint8_t* out = message.data<uint8_t>();
  for (int64_t i = 0; i < kk; ++i) std::memcpy(out + 4 * i, &v[idx[i]], 4);
  std::memcpy(out + 4 * kk, idx.data(), 4 * kk);
  return message;
}

void TopK::decompress_add(const Tensor& message_in, Tensor& out, const CompressContext&) const {
  const Tensor message = message_in.contiguous();
  const int64_t kk = message.numel() / 8;
  const uint8_t* m = message.data<uint8_t>();
  float* o = out.data<float>();
  for (int64_t i = 0; i < kk; ++i) {
    float value;
    int32_t index;
    std::memcpy(&value, m + 4 * i, 4);
    std::memcpy(&index, m + 4 * kk + 4 * i, 4);
    TS_CHECK(index >= 0 && index < out.numel(), "TopK: index ", index, " out of range for ",
             out.numel(), " elements (a corrupt message)");
    o[index] += value;
  }
}

}  // namespace compression
}  // namespace dist
}  // namespace tessera
