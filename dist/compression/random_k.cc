#include "dist/compression/random_k.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "tensor/ops.h"

namespace tessera {
namespace dist {
namespace compression {

RandomK::RandomK(double ratio, uint64_t seed) : ratio_(ratio), seed_(seed) {
  TS_CHECK(ratio > 0 && ratio <= 1, "RandomK: ratio must be in (0, 1], got ", ratio);
}

std::string RandomK::name() const { return with_ratio("randomk", ratio_); }

int64_t RandomK::k(int64_t n) const { return sparse_count(ratio_, n); }

std::vector<int64_t> RandomK::indices(int64_t n, const CompressContext& ctx) const {
  // A partial Fisher-Yates shuffle driven by the (step, bucket) stream: the first k positions
  // are a uniform k-subset. The rank is not in the key: every rank draws the same subset.
  const uint64_t s = draw_seed(seed_, ctx.step, ctx.bucket, 0);
  const int64_t kk = k(n);
  std::vector<int64_t> perm(static_cast<size_t>(n));
  std::iota(perm.begin(), perm.end(), 0);
  for (int64_t i = 0; i < kk; ++i) {
    const uint64_t r = (static_cast<uint64_t>(random_word(s, 2 * i)) << 32) | random_word(s, 2 * i + 1);
    const int64_t j = i + static_cast<int64_t>(r % static_cast<uint64_t>(n - i));
    std::swap(perm[i], perm[j]);
  }
  perm.resize(static_cast<size_t>(kk));
  std::sort(perm.begin(), perm.end());
  return perm;
}

Tensor RandomK::compress(const Tensor& x_in, const CompressContext& ctx) {
  const Tensor x = x_in.contiguous();
  const std::vector<int64_t> idx = indices(x.numel(), ctx);
  Tensor message = empty({static_cast<int64_t>(idx.size())}, kF32);
  const float* v = x.data<float>();
  float* m = message.data<float>();
  for (size_t i = 0; i < idx.size(); ++i) m[i] = v[idx[i]];
  return message;
}

void RandomK::decompress_add(const Tensor& message_in, Tensor& out, const CompressContext& ctx) const {
  const Tensor message = message_in.contiguous();
  const int64_t n = out.numel();
  const std::vector<int64_t> idx = indices(n, ctx);
  TS_CHECK(static_cast<int64_t>(idx.size()) == message.numel(), "RandomK: a message of ",
           message.numel(), " values for k = ", idx.size());
  const float scale = static_cast<float>(static_cast<double>(n) / static_cast<double>(idx.size()));
  const float* m = message.data<float>();
  float* o = out.data<float>();
  for (size_t i = 0; i < idx.size(); ++i) o[idx[i]] += scale * m[i];
}

}  // namespace compression
}  // namespace dist
}  // namespace tessera
