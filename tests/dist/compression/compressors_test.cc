// The compressors against references written out here: top-k keeps exactly the k largest
// magnitudes (a sort of the magnitudes); random-k's indices are distinct, the same for every
// rank and scaled by n/k; QSGD is unbiased (the mean of many draws within its variance bound),
// its error with a norm per sub-bucket within the paper's bound, and its packing round-trips;
// sign packs and unpacks exactly; bit packing round-trips every width; error feedback loses nothing over T steps (applied + residual = sum of gradients);
// wire sizes equal the formulas in the headers; bad specs are errors naming the value.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <iostream>
#include <limits>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "dist/compression/bit_packing.h"
#include "dist/compression/compressor.h"
#include "dist/compression/error_feedback.h"
#include "dist/compression/half_precision.h"
#include "dist/compression/make_hook.h"
#include "dist/compression/qsgd.h"
#include "dist/compression/random_k.h"
#include "dist/compression/sign.h"
#include "dist/compression/top_k.h"
#include "tensor/ops.h"
#include "tensor/random.h"

namespace tessera {
namespace dist {
namespace compression {
namespace {

Tensor random_vector(int64_t n, uint64_t seed) {
  Generator g(seed);
  return randn({n}, kF32, &g);
}

std::vector<float> values(const Tensor& t) { return t.contiguous().to_vector<float>(); }

TEST(BitPacking, RoundTripsEveryWidthAndPacksLeastSignificantBitFirst) {
  for (int width = 1; width <= 32; ++width) {
    std::vector<uint32_t> codes(37), back(37);
    for (size_t i = 0; i < codes.size(); ++i) {
      codes[i] = static_cast<uint32_t>((i * 2654435761u) & (width == 32 ? 0xFFFFFFFFu : (1u << width) - 1));
    }
    std::vector<uint8_t> bytes(static_cast<size_t>(packed_bytes(37, width)));
    pack_bits(codes.data(), 37, width, bytes.data());
    unpack_bits(bytes.data(), 37, width, back.data());
    EXPECT_EQ(codes, back) << "width " << width;
  }
  // The example in bit_packing.h: 5, 2, 7 in 3 bits.
  const uint32_t codes[3] = {5, 2, 7};
  uint8_t bytes[2];
  pack_bits(codes, 3, 3, bytes);
  EXPECT_EQ(bytes[0], 0b11010101);
  EXPECT_EQ(bytes[1], 0b00000001);
}

TEST(TopK, KeepsExactlyTheKLargestMagnitudes) {
  const int64_t n = 1000;
  const Tensor x = random_vector(n, 1);
  TopK c(0.013);  // k = ceil(13) = 13
  EXPECT_EQ(c.k(n), 13);
  const Tensor m = c.compress(x, {});
  EXPECT_EQ(m.numel(), c.message_bytes(n));
  EXPECT_EQ(m.numel(), 8 * 13);
  const std::vector<float> v = values(x), d = values(decompress(c, m, n, {}));
  // The reference: indices sorted by magnitude, the first 13 kept.
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return std::fabs(v[a]) > std::fabs(v[b]); });
  const std::set<int> kept(order.begin(), order.begin() + 13);
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(d[i], kept.count(static_cast<int>(i)) ? v[i] : 0.0f) << i;
  }
}

TEST(RandomK, SameIndicesOnEveryRankScaledToBeUnbiased) {
  const int64_t n = 200;
  RandomK c(0.1, /*seed=*/5);
  const CompressContext rank0{3, 2, 0, 4}, rank3{3, 2, 3, 4}, next_step{4, 2, 0, 4};
  const std::vector<int64_t> a = c.indices(n, rank0), b = c.indices(n, rank3), later = c.indices(n, next_step);
  EXPECT_EQ(a, b);  // the rank is not in the key
  EXPECT_NE(a, later);
  EXPECT_EQ(static_cast<int64_t>(a.size()), c.k(n));
  EXPECT_EQ(std::set<int64_t>(a.begin(), a.end()).size(), a.size());
  EXPECT_TRUE(std::is_sorted(a.begin(), a.end()));
  const Tensor x = random_vector(n, 2);
  const std::vector<float> v = values(x), d = values(decompress(c, c.compress(x, rank0), n, rank0));
  for (int64_t i = 0; i < n; ++i) {
    const bool chosen = std::binary_search(a.begin(), a.end(), i);
    EXPECT_FLOAT_EQ(d[i], chosen ? v[i] * (200.0f / 20.0f) : 0.0f) << i;
  }
  // Unbiased: each index is drawn with probability k/n; over 4000 steps the mean of C(x) is x
  // within 5 standard deviations of the estimate (variance x_i^2 (n/k - 1) / steps).
  const int steps = 4000;
  std::vector<double> mean(n, 0);
  for (int s = 0; s < steps; ++s) {
    const CompressContext ctx{s, 0, 0, 1};
    const std::vector<float> ds = values(decompress(c, c.compress(x, ctx), n, ctx));
    for (int64_t i = 0; i < n; ++i) mean[i] += ds[i] / steps;
  }
  for (int64_t i = 0; i < n; ++i) {
    const double sd = std::fabs(v[i]) * std::sqrt((10.0 - 1) / steps);
    EXPECT_NEAR(mean[i], v[i], 5 * sd + 1e-6) << i;
  }
}

TEST(QSGD, IsUnbiasedWithinItsVarianceBoundAndItsFormatRoundTrips) {
  const int64_t n = 64;
  const Tensor x = random_vector(n, 3);
  const std::vector<float> v = values(x);
  double norm = 0;
  for (float f : v) norm += static_cast<double>(f) * f;
  norm = std::sqrt(norm);
  for (int s : {1, 4, 16}) {
    QSGD c(s, 11);
    EXPECT_EQ(c.bits_per_element(), s == 1 ? 2 : s == 4 ? 4 : 6);
    EXPECT_EQ(c.message_bytes(n), 4 + (n * c.bits_per_element() + 7) / 8);  // 64 < 512: one norm
    // Every decoded entry is sign(x_i) norm l / s with l the floor or the ceiling of r_i.
    const CompressContext ctx{0, 0, 1, 2};
    const Tensor m = c.compress(x, ctx);
    ASSERT_EQ(m.numel(), c.message_bytes(n));
    const std::vector<float> d = values(decompress(c, m, n, ctx));
    for (int64_t i = 0; i < n; ++i) {
      const double r = std::fabs(v[i]) / norm * s;
      const double level = std::fabs(d[i]) / norm * s;
      EXPECT_NEAR(level, std::round(level), 1e-4) << i;
      EXPECT_TRUE(std::round(level) == std::floor(r) || std::round(level) == std::ceil(r)) << i;
      if (d[i] != 0) {
        EXPECT_EQ(d[i] < 0, v[i] < 0) << i;
      }
    }
    // Unbiased: the mean over many steps is x; QSGD's variance per entry is at most
    // norm^2 / (4 s^2) (the rounding of r_i between two levels).
    const int steps = 3000;
    std::vector<double> mean(n, 0);
    for (int t = 0; t < steps; ++t) {
      const CompressContext at{t, 0, 0, 1};
      const std::vector<float> dt = values(decompress(c, c.compress(x, at), n, at));
      for (int64_t i = 0; i < n; ++i) mean[i] += dt[i] / steps;
    }
    const double sd = norm / (2.0 * s) / std::sqrt(static_cast<double>(steps));
    for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(mean[i], v[i], 5 * sd) << "s " << s << " i " << i;
  }
}

// ||D(C(x)) - x||^2 / ||x||^2, averaged over `draws` steps (each step its own random draws).
double relative_squared_error(QSGD& c, const Tensor& x, int draws) {
  const std::vector<float> v = values(x);
  double norm2 = 0;
  for (float f : v) norm2 += static_cast<double>(f) * f;
  double total = 0;
  for (int t = 0; t < draws; ++t) {
    const CompressContext ctx{t, 0, 0, 1};
    const std::vector<float> d = values(decompress(c, c.compress(x, ctx), x.numel(), ctx));
    for (size_t i = 0; i < v.size(); ++i) total += (static_cast<double>(d[i]) - v[i]) * (d[i] - v[i]);
  }
  return total / draws / norm2;
}

// The paper's Lemma 3.1 per sub-bucket of d entries: E ||Q(x) - x||^2 <= min(d / s^2,
// sqrt(d) / s) ||x||^2, whatever n (issue 49). The measured mean over 30 draws is below it. One
// norm over all 16,384 entries (qsgd's format before, d = n) is far above the bound for d = 512:
// its error grows as sqrt(n) / s (Gaussian x: about 0.8 sqrt(n) / s ||x||^2).
TEST(QSGD, PerBucketNormsKeepTheErrorWithinThePapersBound) {
  const int64_t n = 16384;
  const Tensor x = random_vector(n, 21);
  for (int s : {1, 4, 16}) {
    for (int64_t d : {int64_t{64}, int64_t{512}}) {
      QSGD c(s, 5, d);
      const double bound = std::min(static_cast<double>(d) / (s * s), std::sqrt(static_cast<double>(d)) / s);
      const double error = relative_squared_error(c, x, 30);
      std::cout << c.name() << ": E||Q(x) - x||^2 / ||x||^2 = " << error << ", bound " << bound << "\n";
      EXPECT_LT(error, bound) << c.name();
    }
    QSGD whole(s, 5, n);
    const double bound = std::min(512.0 / (s * s), std::sqrt(512.0) / s);
    const double error = relative_squared_error(whole, x, 30);
    std::cout << whole.name() << ": " << error << " (the bound for d = 512: " << bound << ")\n";
    EXPECT_GT(error, 2 * bound) << whole.name();
  }
}

// Unbiased and on its levels with several sub-buckets, the last one shorter (300 = 4 x 64 + 44):
// each entry decodes to sign(x_i) ||x_B|| l / s, l the floor or ceiling of r_i = |x_i| s /
// ||x_B|| for its own sub-bucket B, and the mean over many steps is x.
TEST(QSGD, IsUnbiasedPerSubBucket) {
  const int64_t n = 300, d = 64;
  const int s = 4;
  const Tensor x = random_vector(n, 4);
  std::vector<float> v = values(x);
  for (int64_t i = 128; i < 192; ++i) v[i] *= 100;  // one sub-bucket far larger than the rest
  const Tensor xs = from_vector<float>(v, {n});
  std::vector<double> norm(n);
  for (int64_t b = 0; b * d < n; ++b) {
    double sq = 0;
    for (int64_t i = b * d; i < std::min(n, (b + 1) * d); ++i) sq += static_cast<double>(v[i]) * v[i];
    for (int64_t i = b * d; i < std::min(n, (b + 1) * d); ++i) norm[i] = std::sqrt(sq);
  }
  QSGD c(s, 9, d);
  ASSERT_EQ(c.message_bytes(n), 4 * 5 + (n * 4 + 7) / 8);
  const int steps = 3000;
  std::vector<double> mean(n, 0);
  for (int t = 0; t < steps; ++t) {
    const CompressContext at{t, 1, 0, 1};
    const std::vector<float> dt = values(decompress(c, c.compress(xs, at), n, at));
    for (int64_t i = 0; i < n; ++i) {
      const double r = std::fabs(v[i]) / norm[i] * s, level = std::fabs(dt[i]) / norm[i] * s;
      ASSERT_NEAR(level, std::round(level), 1e-3) << i;
      ASSERT_TRUE(std::round(level) == std::floor(r) || std::round(level) == std::ceil(r)) << i;
      mean[i] += dt[i] / steps;
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    const double sd = norm[i] / (2.0 * s) / std::sqrt(static_cast<double>(steps));
    EXPECT_NEAR(mean[i], v[i], 5 * sd) << i;
  }
}

// n = 5 in sub-buckets of d = 2: three norms, [x0 x1] [x2 x3] [x4], then 5 codes of 2 bits
// (s = 1). Each |x_i| is 0 or its sub-bucket's norm, so every level is exact (no rounding draw
// moves it) and the message is literal: 12 bytes of norms, 2 of codes.
TEST(QSGD, ALiteralMessageOfThreeNorms) {
  QSGD c(1, 0, 2);
  EXPECT_EQ(c.name(), "qsgd:1:2");
  EXPECT_EQ(c.norm_count(5), 3);
  EXPECT_EQ(c.message_bytes(5), 3 * 4 + 2);
  const Tensor x = from_vector<float>({3, 0, 0, -2, 5}, {5});
  const Tensor m = c.compress(x, {});
  ASSERT_EQ(m.numel(), 14);
  const uint8_t* bytes = m.data<uint8_t>();
  float norms[3];
  std::memcpy(norms, bytes, 12);
  EXPECT_EQ(norms[0], 3.0f);
  EXPECT_EQ(norms[1], 2.0f);
  EXPECT_EQ(norms[2], 5.0f);
  // codes (level << 1 | negative): 3 -> 10, 0 -> 00, 0 -> 00, -2 -> 11, 5 -> 10; LSB first.
  EXPECT_EQ(bytes[12], 0b11000010);
  EXPECT_EQ(bytes[13], 0b10);
  EXPECT_EQ(values(decompress(c, m, 5, {})), (std::vector<float>{3, 0, 0, -2, 5}));
  // A message decodes against the norms it carries: halve the second, x3 halves.
  Tensor edited = m.clone();
  const float half = 1.0f;
  std::memcpy(edited.data<uint8_t>() + 4, &half, 4);
  EXPECT_EQ(values(decompress(c, edited, 5, {})), (std::vector<float>{3, 0, 0, -1, 5}));
}

TEST(Sign, PacksAndUnpacksExactly) {
  const Tensor x = from_vector<float>({0.5f, -2.0f, 0.0f, 1.5f, -0.25f, 3.0f, -1.0f, 0.75f, -0.5f}, {9});
  Sign c;
  const Tensor m = c.compress(x, {});
  ASSERT_EQ(m.numel(), 4 + 2);
  const float scale = (0.5f + 2 + 0 + 1.5f + 0.25f + 3 + 1 + 0.75f + 0.5f) / 9;
  const uint8_t* bytes = m.data<uint8_t>();
  EXPECT_EQ(bytes[4], 0b10101101);  // + - + + - + - +, least significant bit first
  EXPECT_EQ(bytes[5], 0b0);         // -
  const std::vector<float> d = values(decompress(c, m, 9, {}));
  const std::vector<float> expected = {scale, -scale, scale, scale, -scale, scale, -scale, scale, -scale};
  for (int i = 0; i < 9; ++i) EXPECT_FLOAT_EQ(d[i], expected[i]) << i;
}

TEST(HalfPrecision, SendsTheRoundingOfXOverN) {
  const Tensor x = from_vector<float>({1.0f / 3, 1000.5f, -7.25f}, {3});
  HalfPrecision c(kF16);
  const CompressContext ctx{0, 0, 0, 4};
  const Tensor m = c.compress(x, ctx);
  EXPECT_EQ(m.dtype(), kF16);
  const std::vector<float> d = values(decompress(c, m, 3, ctx));
  const std::vector<float> v = values(x);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(d[i], static_cast<float>(from_vector<float>({v[i] / 4}, {1}).to(kF16).to(kF32).item()) * 4);
  }
}

// Error feedback loses nothing: over T steps the sum of what was applied plus the last residual
// equals the sum of the gradients (up to f32 rounding of the running sums).
TEST(ErrorFeedback, AppliedPlusResidualEqualsTheSumOfTheGradients) {
  for (const char* spec : {"topk:0.05", "sign", "qsgd:2", "randomk:0.1"}) {
    ErrorFeedback ef(make_compressor(parse_compression(spec), 7));
    const int64_t n = 300;
    std::vector<double> applied(n, 0), truth(n, 0);
    for (int t = 0; t < 20; ++t) {
      const Tensor g = random_vector(n, 100 + t);
      const CompressContext ctx{t, 0, 0, 1};
      const Tensor m = ef.compress(g, ctx);
      const std::vector<float> d = values(decompress(ef, m, n, ctx)), gv = values(g);
      for (int64_t i = 0; i < n; ++i) {
        applied[i] += d[i];
        truth[i] += gv[i];
      }
    }
    const std::vector<float> e = values(ef.residual(0));
    for (int64_t i = 0; i < n; ++i) {
      // f32 rounding, relative to the largest of the terms (random-k's n/k scaling makes its
      // residual grow step after step: error feedback suits the biased compressors).
      const double scale = 1 + std::fabs(truth[i]) + std::fabs(applied[i]) + std::fabs(e[i]);
      EXPECT_NEAR(applied[i] + e[i], truth[i], 2e-5 * scale) << spec << " " << i;
    }
    // And its state round-trips.
    ErrorFeedback copy(make_compressor(parse_compression(spec), 7));
    copy.load_state_dict(ef.state_dict());
    EXPECT_TRUE(allclose(copy.residual(0), ef.residual(0), 0, 0)) << spec;
  }
}

// settle(bucket, false) undoes the last compression's change to the residual (the hook's answer
// to a step whose sum is not finite); settle(bucket, true) keeps it. The first compression of a
// bucket undone leaves no residual at all.
TEST(ErrorFeedback, SettleUndoesOrKeepsTheLastCompression) {
  ErrorFeedback ef(make_compressor(parse_compression("topk:0.1"), 0));
  const int64_t n = 50;
  ef.compress(random_vector(n, 1), {0, 0, 0, 1});
  ef.settle(0, false);
  EXPECT_FALSE(ef.residual(0).defined());
  ef.compress(random_vector(n, 2), {0, 0, 0, 1});
  ef.settle(0, true);
  const Tensor kept = ef.residual(0).clone();
  Tensor overflow = random_vector(n, 3);
  overflow.narrow(0, 7, 1).fill_(std::numeric_limits<float>::infinity());
  ef.compress(overflow, {1, 0, 0, 1});
  EXPECT_FALSE(std::isfinite(values(ef.residual(0))[7]));
  ef.settle(0, false);
  EXPECT_EQ(values(ef.residual(0)), values(kept));
  EXPECT_EQ(ef.state_dict().size(), 1u);
}

TEST(CompressionSpec, ParsesTheToolsSpellingAndNamesBadValues) {
  EXPECT_EQ(parse_compression("topk:0.01").ratio, 0.01);
  EXPECT_EQ(parse_compression("qsgd:16").levels, 16);
  EXPECT_EQ(parse_compression("qsgd:16").qsgd_bucket, 512);
  EXPECT_EQ(parse_compression("qsgd:16:128").levels, 16);
  EXPECT_EQ(parse_compression("qsgd:16:128").qsgd_bucket, 128);
  EXPECT_EQ(make_compression_hook(parse_compression("qsgd:16"))->name(), "qsgd:16:512");
  EXPECT_EQ(make_compression_hook(parse_compression("qsgd:4:100"))->name(), "qsgd:4:100");
  EXPECT_EQ(make_compression_hook(parse_compression("none")), nullptr);
  EXPECT_EQ(make_compression_hook(parse_compression("topk:0.5"))->name(), "topk:0.5+ef");
  EXPECT_EQ(make_compression_hook(parse_compression("randomk:0.5"))->name(), "randomk:0.5");
  EXPECT_EQ(make_compression_hook(parse_compression("sign"), false)->name(), "sign");
  auto message = [](const std::string& text) {
    try {
      parse_compression(text);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(message("topk:1.5").find("the ratio must be in (0, 1], got 1.5"), std::string::npos);
  EXPECT_NE(message("topk:0").find("got 0"), std::string::npos);
  EXPECT_NE(message("qsgd:0").find("got 0"), std::string::npos);
  EXPECT_NE(message("qsgd:2.5").find("got 2.5"), std::string::npos);
  EXPECT_NE(message("qsgd:16:0").find("the bucket (entries per norm) must be an integer in "
                                      "[1, 2^30], got 0"), std::string::npos);
  EXPECT_NE(message("qsgd:16:1.5").find("got 1.5"), std::string::npos);
  EXPECT_NE(message("qsgd:16:").find("'' is not a number"), std::string::npos);
  EXPECT_NE(message("qsgd:16:8:2").find("'8:2' is not a number"), std::string::npos);
  EXPECT_NE(message("topk").find("topk needs a value"), std::string::npos);
  EXPECT_NE(message("sign:3").find("sign takes no value"), std::string::npos);
  EXPECT_NE(message("zip").find("compression 'zip'"), std::string::npos);
  EXPECT_NE(message("randomk:x").find("'x' is not a number"), std::string::npos);
  EXPECT_NE(message("powersgd:1.5").find("got 1.5"), std::string::npos);
  EXPECT_EQ(parse_compression("powersgd:4").rank, 4);
  EXPECT_EQ(make_compression_hook(parse_compression("powersgd:4"))->name(), "powersgd:4");
}

}  // namespace
}  // namespace compression
}  // namespace dist
}  // namespace tessera
