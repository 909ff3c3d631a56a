// attention_bench: the fused causal attention (tensor/ops.h's causal_attention) beside the
// floor of the GEMMs an unfused attention runs on the same shapes.
//
//   bazel-bin/tools/bench/attention_bench [--t=256,512,1024] [--batch=1] [--heads=12]
//       [--head-dim=64] [--threads=N] [--repeats=20] [--clock=cpu]
//
// Per T it prints the median milliseconds of the fused forward and backward, and of tessera's
// matmul (OpenBLAS sgemm) on the unfused attention's GEMMs, batched over B x H heads:
//   forward:  S = Q K^T, O = P V                      (the two GEMMs: 2 x 2 B H T^2 D flops)
//   backward: dV = P^T dO, dP = dO V^T, dQ = dS K, dK = dS^T Q   (four more)
// The fused op skips the key blocks above the diagonal (about half of each product) but
// recomputes S in backward and runs the softmax's exponentials besides, so "fused / GEMMs" is
// its time over the six full GEMMs'. Peak memory is the allocator's (tensor/allocator.h) over
// one forward and backward, beside the [B, H, T, T] scores an unfused attention keeps.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <vector>

#include "tensor/allocator.h"
#include "tensor/ops.h"
#include "tensor/parallel.h"
#include "tools/bench/bench_clock.h"
#include "tools/bench/bench_flags.h"
#include "tools/bench/median.h"

namespace tessera {
namespace {

constexpr const char* kBench = "attention_bench";
constexpr const char* kUsage =
    "--t=LIST --batch=N --heads=N --head-dim=N --threads=N --repeats=N --clock=cpu";

struct Flags {
  std::vector<int64_t> lengths{256, 512, 1024};
  int64_t batch = 1, heads = 12, head_dim = 64, threads = 0, repeats = 20;
};

bool parse(int argc, char** argv, Flags* f) {
  for (int i = 1; i < argc; ++i) {
    const char* arg = argv[i];
    const char* value = nullptr;
    bool ok = true;
    if ((value = bench::flag_value(arg, "--t="))) {
      ok = bench::parse_numbers<int64_t>(kBench, "--t=", value, 1, &f->lengths);
    } else if ((value = bench::flag_value(arg, "--batch="))) {
      ok = bench::parse_number<int64_t>(kBench, "--batch=", value, 1, &f->batch);
    } else if ((value = bench::flag_value(arg, "--heads="))) {
      ok = bench::parse_number<int64_t>(kBench, "--heads=", value, 1, &f->heads);
    } else if ((value = bench::flag_value(arg, "--head-dim="))) {
      ok = bench::parse_number<int64_t>(kBench, "--head-dim=", value, 1, &f->head_dim);
    } else if ((value = bench::flag_value(arg, "--threads="))) {
      ok = bench::parse_number<int64_t>(kBench, "--threads=", value, 1, &f->threads);
    } else if ((value = bench::flag_value(arg, "--repeats="))) {
      ok = bench::parse_number<int64_t>(kBench, "--repeats=", value, 1, &f->repeats);
    } else if (!bench::parse_clock_flag(arg)) {
      bench::print_unknown_flag(kBench, arg, kUsage);
      return false;
    }
    if (!ok) return false;
  }
  return true;
}

// The median over `repeats` timed runs, after three untimed ones (with one, the first timed
// runs of a short T still took several times the median).
double median_ms(int64_t repeats, const std::function<void()>& run) {
  for (int i = 0; i < 3; ++i) run();
  std::vector<double> ms;
  for (int64_t i = 0; i < repeats; ++i) {
    const double start = bench::now_ms();
    run();
    ms.push_back(bench::now_ms() - start);
  }
  return bench::median(ms);
}

void run_length(const Flags& f, int64_t t) {
  const int64_t bh = f.batch * f.heads, d = f.head_dim;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  Generator gen(1);
  const Shape shape{f.batch, f.heads, t, d};
  const Tensor q = randn(shape, kF32, &gen), k = randn(shape, kF32, &gen),
               v = randn(shape, kF32, &gen), g = randn(shape, kF32, &gen);

  CausalAttentionResult fwd;
  const double forward = median_ms(f.repeats, [&] { fwd = causal_attention(q, k, v, scale); });
  const double backward = median_ms(f.repeats, [&] {
    causal_attention_backward(g, q, k, v, fwd.output, fwd.logsumexp, scale);
  });
  const Device cpu = Device::cpu();
  fwd = {};
  reset_peak(cpu);
  const int64_t before = memory_stats(cpu).current_bytes;
  {
    const auto r = causal_attention(q, k, v, scale);
    causal_attention_backward(g, q, k, v, r.output, r.logsumexp, scale);
  }
  const double peak_mb = (memory_stats(cpu).peak_bytes - before) / 1e6;

  // The unfused GEMMs on [B H, T, *] operands (values do not matter to a GEMM's time).
  const Tensor q3 = q.view({bh, t, d}), k3 = k.view({bh, t, d}), v3 = v.view({bh, t, d}),
               g3 = g.view({bh, t, d});
  const Tensor p = randn({bh, t, t}, kF32, &gen);
  const double qk = median_ms(f.repeats, [&] { matmul(q3, k3.transpose(1, 2)); });
  const double pv = median_ms(f.repeats, [&] { matmul(p, v3); });
  const double bwd_gemms = median_ms(f.repeats, [&] {
    matmul(p.transpose(1, 2), g3);  // dV
    matmul(g3, v3.transpose(1, 2));  // dP
    matmul(p, k3);                   // dQ
    matmul(p.transpose(1, 2), q3);  // dK
  });
  const double gemms = qk + pv + bwd_gemms;
  const double scores_mb = 2.0 * bh * t * t * 4 / 1e6;  // S and P, f32
  std::printf("%6lld %9.2f %9.2f %9.2f | %9.2f %9.2f %9.2f | %6.2f %6.2f | %8.1f %10.1f\n",
              static_cast<long long>(t), forward, backward, forward + backward, qk + pv,
              bwd_gemms, gemms, forward / (qk + pv), (forward + backward) / gemms, peak_mb,
              scores_mb);
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  using namespace tessera;
  Flags f;
  if (!parse(argc, argv, &f)) return 2;
  if (f.threads > 0) set_num_threads(static_cast<int>(f.threads));
  std::printf("causal attention, B=%lld H=%lld D=%lld, %d threads, %s clock, median of %lld (ms)\n",
              static_cast<long long>(f.batch), static_cast<long long>(f.heads),
              static_cast<long long>(f.head_dim), num_threads(),
              bench::cpu_clock ? "cpu" : "wall", static_cast<long long>(f.repeats));
  std::printf("%6s %9s %9s %9s | %9s %9s %9s | %6s %6s | %8s %10s\n", "T", "fwd", "bwd",
              "fwd+bwd", "gemm fwd", "gemm bwd", "gemm all", "f/gf", "all/ga", "peak MB",
              "S+P MB");
  for (const int64_t t : f.lengths) run_length(f, t);
  return 0;
}
