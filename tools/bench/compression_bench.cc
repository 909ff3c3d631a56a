// The compute cost of each compressor, on one thread, for one bucket of n f32 entries: the
// sizes are ResNet-20's two DDP buckets in the train tool (262,250 and 7,184 of its 269,434
// gradients: the first bucket closes past 1 MB) and 1M.
//
//   Hook/SPEC       what CompressionHook computes per bucket on 2 ranks: compress, then one
//                   decompression for an all-reduce transport (fp16, random-k) or two for an
//                   all-gather one (top-k, QSGD, sign: every rank's message); "+ef" wraps the
//                   compressor in ErrorFeedback as the train tool does for top-k and sign
//                   (one more decompression and two elementwise passes inside compress).
//   TopK...         how top-k's k entries are found, three ways, each ending with the k indices
//                   in ascending order:
//     TopKExactIndirect   the library's TopK::compress selection: std::nth_element over an index
//                         array with a magnitude comparator (ties to the lower index), then a
//                         sort of the k indices;
//     TopKExactMagnitudes the same k entries from a nth_element over a copy of the magnitudes
//                         (the k-th largest magnitude t), then one pass: every |x| > t, and
//                         |x| == t by lowest index until k (checked equal to the library's);
//     TopKSampledThreshold a sampled threshold (Lin et al., Deep Gradient Compression, 2018):
//                         t = the ceil(ratio s)-th largest magnitude of s = 1% of the entries
//                         drawn at random, then one pass keeping |x| >= t; the count is not
//                         exactly k (counters: selected_over_k, the mean over iterations, each
//                         a new sample; min_over_k and max_over_k).
//   PowerSGD/RANK   PowerSGDHook on ResNet-20's gradients (Fashion-MNIST: 1 input channel),
//                   bucketed as the train tool's DDP does (reverse order, the first bucket
//                   closing past 1 MB), one step = reduce() and wait() of every bucket on a
//                   world of one process: the all-reduces are copies, so the time is the
//                   hook's compute (P = M Q, orthogonalize, Q = M^T P, P Q^T, the residual).
//                   Warm start and error feedback on, as the train tool runs it.
//
//   bazel run -c opt //tools/bench:compression_bench
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "dist/compression/error_feedback.h"
#include "dist/compression/make_hook.h"
#include "dist/compression/powersgd.h"
#include "dist/compression/top_k.h"
#include "dist/environment.h"
#include "models/resnet.h"
#include "tensor/ops.h"
#include "tensor/random.h"

namespace tessera {
namespace dist {
namespace compression {
namespace {

constexpr int kWorld = 2;

void hook(benchmark::State& state, const std::string& spec, bool error_feedback) {
  const int64_t n = state.range(0);
  Generator g(1);
  const Tensor x = randn({n}, kF32, &g);
  std::unique_ptr<Compressor> c = make_compressor(parse_compression(spec), 0);
  if (error_feedback) c = std::make_unique<ErrorFeedback>(std::move(c));
  const int decompressions = c->transport() == Transport::kAllGather ? kWorld : 1;
  Tensor out = zeros({n}, kF32);
  int64_t step = 0;
  for (auto _ : state) {
    const CompressContext ctx{step++, 0, 0, kWorld};
    const Tensor m = c->compress(x, ctx);
    out.zero_();
    for (int r = 0; r < decompressions; ++r) c->decompress_add(m, out, ctx);
    benchmark::DoNotOptimize(out.data<float>());
  }
  state.counters["bytes_sent_ratio"] = bytes_ratio(*c, n, kWorld);
  state.SetItemsProcessed(state.iterations() * n);
}

// --- top-k selection, three ways --------------------------------------------------------------

constexpr double kRatio = 0.01;

std::vector<float> gradient(int64_t n) {
  Generator g(1);
  const Tensor x = randn({n}, kF32, &g);
  return x.to_vector<float>();
}

// The library's selection (TopK::compress without the packing).
std::vector<int32_t> exact_indirect(const std::vector<float>& x, int64_t k) {
  const float* v = x.data();
  std::vector<int32_t> idx(x.size());
  std::iota(idx.begin(), idx.end(), 0);
  auto larger = [v](int32_t a, int32_t b) {
    const float ma = std::fabs(v[a]), mb = std::fabs(v[b]);
    return ma > mb || (ma == mb && a < b);
  };
  std::nth_element(idx.begin(), idx.begin() + (k - 1), idx.end(), larger);
  idx.resize(static_cast<size_t>(k));
  std::sort(idx.begin(), idx.end());
  return idx;
}

// The same entries from the k-th largest magnitude.
std::vector<int32_t> exact_magnitudes(const std::vector<float>& x, int64_t k,
                                      std::vector<float>& scratch) {
  const int64_t n = static_cast<int64_t>(x.size());
  scratch.resize(x.size());
  for (int64_t i = 0; i < n; ++i) scratch[i] = std::fabs(x[i]);
  std::nth_element(scratch.begin(), scratch.begin() + (k - 1), scratch.end(), std::greater<float>());
  const float t = scratch[k - 1];
  int64_t above = 0;
  for (int64_t i = 0; i < n; ++i) above += std::fabs(x[i]) > t;
  int64_t ties = k - above;  // entries equal to t to keep, lowest index first
  std::vector<int32_t> idx;
  idx.reserve(static_cast<size_t>(k));
  for (int64_t i = 0; i < n; ++i) {
    const float m = std::fabs(x[i]);
    if (m > t || (m == t && ties-- > 0)) idx.push_back(static_cast<int32_t>(i));
  }
  return idx;
}

// A threshold from a 1% random sample, then one pass.
std::vector<int32_t> sampled_threshold(const std::vector<float>& x, int64_t k, uint64_t seed,
                                       std::vector<float>& scratch) {
  const int64_t n = static_cast<int64_t>(x.size());
  const int64_t s = std::max<int64_t>(1, n / 100);
  scratch.resize(static_cast<size_t>(s));
  for (int64_t i = 0; i < s; ++i) {
    scratch[i] = std::fabs(x[random_word(seed, static_cast<uint64_t>(i)) % static_cast<uint64_t>(n)]);
  }
  const int64_t ks = std::min<int64_t>(s, static_cast<int64_t>(std::ceil(kRatio * s)));
  std::nth_element(scratch.begin(), scratch.begin() + (ks - 1), scratch.end(), std::greater<float>());
  const float t = scratch[ks - 1];
  std::vector<int32_t> idx;
  idx.reserve(static_cast<size_t>(2 * k));
  for (int64_t i = 0; i < n; ++i) {
    if (std::fabs(x[i]) >= t) idx.push_back(static_cast<int32_t>(i));
  }
  return idx;
}

void TopKExactIndirect(benchmark::State& state) {
  const std::vector<float> x = gradient(state.range(0));
  const int64_t k = TopK(kRatio).k(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(exact_indirect(x, k).data());
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void TopKExactMagnitudes(benchmark::State& state) {
  const std::vector<float> x = gradient(state.range(0));
  const int64_t k = TopK(kRatio).k(state.range(0));
  std::vector<float> scratch;
  if (exact_magnitudes(x, k, scratch) != exact_indirect(x, k)) {
    std::fprintf(stderr, "TopKExactMagnitudes: not the library's selection\n");
    std::abort();
  }
  for (auto _ : state) benchmark::DoNotOptimize(exact_magnitudes(x, k, scratch).data());
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void TopKSampledThreshold(benchmark::State& state) {
  const std::vector<float> x = gradient(state.range(0));
  const int64_t k = TopK(kRatio).k(state.range(0));
  std::vector<float> scratch;
  uint64_t seed = 0;
  double selected = 0;
  size_t fewest = x.size(), most = 0;
  for (auto _ : state) {
    const std::vector<int32_t> idx = sampled_threshold(x, k, draw_seed(7, seed++, 0, 0), scratch);
    selected += static_cast<double>(idx.size());
    fewest = std::min(fewest, idx.size());
    most = std::max(most, idx.size());
    benchmark::DoNotOptimize(idx.data());
  }
  state.counters["selected_over_k"] = selected / static_cast<double>(state.iterations()) / k;
  state.counters["min_over_k"] = static_cast<double>(fewest) / k;
  state.counters["max_over_k"] = static_cast<double>(most) / k;
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

// --- PowerSGD on ResNet-20's shapes ----------------------------------------------------------

std::vector<GradBucket> resnet20_buckets() {
  const auto parameters = models::ResNet20(1, 10)->parameters();
  std::vector<std::vector<Shape>> shapes(1);
  int64_t bytes = 0;
  for (auto it = parameters.rbegin(); it != parameters.rend(); ++it) {
    if (bytes > (1 << 20)) {  // DDP's first bucket: 1 MB
      shapes.emplace_back();
      bytes = 0;
    }
    shapes.back().push_back(it->shape());
    bytes += 4 * it->numel();
  }
  std::vector<GradBucket> buckets;
  Generator g(3);
  for (size_t b = 0; b < shapes.size(); ++b) {
    GradBucket bucket;
    bucket.index = b;
    int64_t n = 0;
    for (const Shape& s : shapes[b]) n += numel(s);
    bucket.buffer = zeros({n}, kF32);
    int64_t at = 0;
    for (size_t k = 0; k < shapes[b].size(); ++k) {
      bucket.gradients.push_back(bucket.buffer.narrow(0, at, numel(shapes[b][k])).view(shapes[b][k]));
      bucket.parameters.push_back(k);
      at += numel(shapes[b][k]);
    }
    buckets.push_back(std::move(bucket));
  }
  return buckets;
}

void PowerSGD(benchmark::State& state) {
  std::vector<GradBucket> buckets = resnet20_buckets();
  std::vector<Tensor> gradients;
  Generator g(5);
  for (const GradBucket& b : buckets) gradients.push_back(randn({b.buffer.numel()}, kF32, &g));
  PowerSGDHook hook(
      PowerSGDOptions().matrix_approximation_rank(state.range(0)).start_powerSGD_iter(2));
  ProcessGroup& group = *world();
  auto step = [&] {
    std::vector<std::shared_ptr<Work>> works;
    for (size_t b = 0; b < buckets.size(); ++b) {
      buckets[b].buffer.copy_(gradients[b]);
      works.push_back(hook.reduce(group, buckets[b]));
    }
    for (auto& w : works) w->wait();
  };
  for (int warm = 0; warm < 3; ++warm) step();  // past start_powerSGD_iter
  for (auto _ : state) step();
  int64_t n = 0, wire = 0;
  for (const GradBucket& b : buckets) {
    n += b.buffer.numel();
    wire += plan_powersgd(b, hook.options()).wire_numel();
  }
  state.counters["numel"] = static_cast<double>(n);
  state.counters["wire_numel"] = static_cast<double>(wire);
  state.counters["buckets"] = static_cast<double>(buckets.size());
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(PowerSGD)->Arg(1)->Arg(2)->Arg(4)->Unit(benchmark::kMillisecond);

#define SIZES Arg(262250)->Arg(7184)->Arg(1 << 20)->Unit(benchmark::kMillisecond)

#define HOOK(name, spec, ef)                                \
  void name(benchmark::State& s) { hook(s, spec, ef); }     \
  BENCHMARK(name)->SIZES

HOOK(HookFp16, "fp16", false);
HOOK(HookTopK1PercentEF, "topk:0.01", true);
HOOK(HookTopK1PercentNoEF, "topk:0.01", false);
HOOK(HookRandomK1Percent, "randomk:0.01", false);
HOOK(HookQsgd4, "qsgd:4", false);
HOOK(HookSignEF, "sign", true);
HOOK(HookSignNoEF, "sign", false);

BENCHMARK(TopKExactIndirect)->SIZES;
BENCHMARK(TopKExactMagnitudes)->SIZES;
BENCHMARK(TopKSampledThreshold)->SIZES;

}  // namespace
}  // namespace compression
}  // namespace dist
}  // namespace tessera

int main(int argc, char** argv) {
  tessera::dist::init(&argc, &argv);  // a world of one process, for PowerSGD's all-reduces
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
