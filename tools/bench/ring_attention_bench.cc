// Ring attention benchmark (dist/context_parallel/ring_attention.h), run under mpirun with C
// ranks: at sequence length s, for the head-tail and the contiguous split,
//   - equality: the ranks' output and q/k/v gradients, gathered, against one process's causal
//     attention on the whole sequence (rank 0 computes it): the largest absolute difference;
//   - overlap: every message under an emulated link (--bandwidth-gbps, --latency-us; the
//     process group holds each send for latency + bytes / bandwidth, network_emulation.h). The
//     exchange alone (the same sends and receives, no compute) takes E; the time a rank spends
//     waiting for the exchange after each step's compute is W without the link and W' with it
//     (the least over --repeats runs: this machine is shared), and the hidden fraction is
//     1 - max over ranks (W' - W) / E;
//   - causal imbalance: each rank's compute time (the block kernels and the combine step,
//     forward and backward) and its share of the causal mask's visible (query, key) pairs:
//     max / mean over the ranks, with and without head-tail order.
//
//   bazel build -c opt //tools/bench:ring_attention_bench
//   tools/bench/ring_attention.sh            (C = 2 and 4, s = 4096)
//   mpirun -np 2 bazel-bin/tools/bench/ring_attention_bench --seq=4096 --heads=4 --head-dim=64
//
// Prints one line per split and measure (rank 0), and one JSON line per split.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "autograd/functions.h"
#include "dist/context_parallel/gather_sequence.h"
#include "dist/context_parallel/ring_attention.h"
#include "dist/environment.h"
#include "tensor/ops.h"
#include "tensor/parallel.h"
#include "tools/bench/bench_clock.h"
#include "tools/bench/bench_flags.h"

using namespace tessera;
namespace cp = tessera::dist::context_parallel;

namespace {

struct Flags {
  int64_t seq = 4096, heads = 4, head_dim = 64, batch = 1;
  int threads = 1, repeats = 5;
  double bandwidth_gbps = 10, latency_us = 10;
};

Flags parse(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const auto value = [&](const char* flag) { return bench::flag_value(argv[i], flag); };
    const auto number = [&](const char* flag, const char* text, auto min, auto* out) {
      if (!bench::parse_number("ring_attention_bench", flag, text, min, out)) std::exit(2);
    };
    if (const char* v = value("--seq=")) number("--seq=", v, int64_t{2}, &f.seq);
    else if (const char* v = value("--heads=")) number("--heads=", v, int64_t{1}, &f.heads);
    else if (const char* v = value("--head-dim=")) number("--head-dim=", v, int64_t{1}, &f.head_dim);
    else if (const char* v = value("--batch=")) number("--batch=", v, int64_t{1}, &f.batch);
    else if (const char* v = value("--threads=")) number("--threads=", v, 1, &f.threads);
    else if (const char* v = value("--repeats=")) number("--repeats=", v, 1, &f.repeats);
    else if (const char* v = value("--bandwidth-gbps=")) f.bandwidth_gbps = std::atof(v);
    else if (const char* v = value("--latency-us=")) f.latency_us = std::atof(v);
    else {
      bench::print_unknown_flag("ring_attention_bench", argv[i],
                                "--seq=S --heads=H --head-dim=D --batch=B --threads=N "
                                "--repeats=N --bandwidth-gbps=G --latency-us=L");
      std::exit(2);
    }
  }
  return f;
}

Tensor random(const Shape& shape, uint64_t seed) {
  Generator gen(seed);
  return randn(shape, kF32, &gen);
}

// Visible (query, key) pairs of the causal mask for a rank's queries: sum over its positions
// p of p + 1.
double visible_pairs(const AttentionPositions& positions) {
  double n = 0;
  for (const int64_t p : positions.expand()) n += static_cast<double>(p + 1);
  return n;
}

// Every rank's value, on every rank.
std::vector<double> all_values(double mine, dist::ProcessGroup& group) {
  Tensor in = scalar_tensor(mine, kF64).view({1});
  Tensor out = empty({group.size()}, kF64);
  group.all_gather(in, out)->wait();
  return out.to_vector<double>();
}

double max_of(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }
double mean_of(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

// The ring's messages without the compute: forward (C-1) K/V exchanges to the right; backward
// (C-1) K/V exchanges and (C-1) hops of dK/dV to the left, each pair at once as the ring posts
// them. Returns the seconds this rank spent.
double exchange_alone(dist::ProcessGroup& group, const Shape& kv_shape) {
  const int c = group.size(), right = (group.rank() + 1) % c, left = (group.rank() + c - 1) % c;
  const Tensor out = zeros(kv_shape), in = empty(kv_shape), out2 = zeros(kv_shape),
               in2 = empty(kv_shape);
  group.barrier()->wait();
  const double start = bench::now_ms();
  for (int s = 0; s + 1 < c; ++s) {
    auto recv = group.recv(in.view({in.numel()}), left, 1);
    auto send = group.send(out.view({out.numel()}), right, 1);
    recv->wait();
    send->wait();
  }
  for (int s = 0; s + 1 < c; ++s) {
    auto recv = group.recv(in.view({in.numel()}), right, 2);
    auto send = group.send(out.view({out.numel()}), left, 2);
    auto recv2 = group.recv(in2.view({in2.numel()}), right, 3);
    auto send2 = group.send(out2.view({out2.numel()}), left, 3);
    recv->wait(), send->wait(), recv2->wait(), send2->wait();
  }
  return (bench::now_ms() - start) / 1e3;
}

int run(const Flags& f, const std::shared_ptr<dist::ProcessGroup>& world) {
  set_num_threads(f.threads);
  const int c = world->size(), rank = world->rank();
  const bool lead = rank == 0;
  if (f.seq % (2 * c) != 0) {
    if (lead) std::fprintf(stderr, "ring_attention_bench: --seq=%lld does not divide into 2 x %d chunks\n",
                           static_cast<long long>(f.seq), c);
    return 2;
  }
  const Shape shape{f.batch, f.heads, f.seq, f.head_dim};
  const double scale = 1.0 / std::sqrt(static_cast<double>(f.head_dim));
  const Tensor q = random(shape, 1), k = random(shape, 2), v = random(shape, 3), g = random(shape, 4);

  // One process's attention, on rank 0 (no emulation needed: nothing is sent).
  Tensor ref_out, ref_dq, ref_dk, ref_dv;
  double one_process_seconds = 0;
  if (lead) {
    Variable qa(q, true), ka(k, true), va(v, true);
    const double start = bench::now_ms();
    const Variable out = causal_attention(qa, ka, va, scale);
    sum(mul(out, Variable(g))).backward();
    one_process_seconds = (bench::now_ms() - start) / 1e3;
    ref_out = out.data(), ref_dq = qa.grad(), ref_dk = ka.grad(), ref_dv = va.grad();
  }
  if (lead) {
    std::printf("ring attention: s = %lld, B = %lld, H = %lld, D = %lld, C = %d ranks, %d thread(s) "
                "a rank; link %.1f Gb/s, %.0f us; one process fwd+bwd %.3f s\n",
                static_cast<long long>(f.seq), static_cast<long long>(f.batch),
                static_cast<long long>(f.heads), static_cast<long long>(f.head_dim), c, f.threads,
                f.bandwidth_gbps, f.latency_us, one_process_seconds);
  }
  dist::NetworkEmulation net;
  net.bandwidth_gbps = f.bandwidth_gbps;
  net.latency_us = f.latency_us;

  for (const cp::SequenceSplit split : {cp::SequenceSplit::kHeadTail, cp::SequenceSplit::kContiguous}) {
    const std::string name = cp::split_name(split);
    const auto mine = [&](const Tensor& x) { return cp::rank_rows(x, 2, rank, c, split); };
    // Equality, without emulation.
    world->set_network_emulation(dist::NetworkEmulation{});
    Variable qr(mine(q), true), kr(mine(k), true), vr(mine(v), true);
    const Variable out =
        cp::ring_attention(qr, kr, vr, scale, world, cp::RingAttentionOptions().split(split));
    sum(mul(out, Variable(mine(g)))).backward();
    const Tensor got_out = cp::gather_sequence(out.data(), 2, *world, split);
    const Tensor got_dq = cp::gather_sequence(qr.grad(), 2, *world, split);
    const Tensor got_dk = cp::gather_sequence(kr.grad(), 2, *world, split);
    const Tensor got_dv = cp::gather_sequence(vr.grad(), 2, *world, split);
    double diff = 0, diff_out = 0;
    if (lead) {
      diff_out = max_abs_diff(got_out, ref_out);
      diff = std::max({diff_out, max_abs_diff(got_dq, ref_dq), max_abs_diff(got_dk, ref_dk),
                       max_abs_diff(got_dv, ref_dv)});
    }

    // Timing: the exchange alone under the emulated link; the ring with no emulation and
    // under it. This machine is shared (other processes take its cores at times), so each
    // figure is the fastest of --repeats runs, a run's time being its slowest rank's.
    const Shape kv_shape{2, f.batch, f.heads, f.seq / c, f.head_dim};
    world->set_network_emulation(net);
    double alone = 1e30;
    for (int r = 0; r < f.repeats; ++r) {
      alone = std::min(alone, max_of(all_values(exchange_alone(*world, kv_shape), *world)));
    }
    double step[2] = {1e30, 1e30};  // no emulation, emulated
    // Per rank, the least over the runs: compute (both modes), and the time spent waiting for
    // the exchange after a step's compute, without the link and with it.
    std::vector<double> computes(c, 1e30), waits[2] = {std::vector<double>(c, 1e30),
                                                       std::vector<double>(c, 1e30)};
    for (int emulated = 0; emulated < 2; ++emulated) {
      world->set_network_emulation(emulated ? net : dist::NetworkEmulation{});
      for (int r = 0; r < f.repeats; ++r) {
        cp::RingAttentionStats stats;
        Variable qt(mine(q), true), kt(mine(k), true), vt(mine(v), true);
        world->barrier()->wait();
        const double start = bench::now_ms();
        const Variable o = cp::ring_attention(qt, kt, vt, scale, world,
                                              cp::RingAttentionOptions().split(split).stats(&stats));
        sum(mul(o, Variable(mine(g)))).backward();
        const double wall = max_of(all_values((bench::now_ms() - start) / 1e3, *world));
        const std::vector<double> compute = all_values(
            stats.forward_compute_seconds + stats.backward_compute_seconds, *world);
        const std::vector<double> wait =
            all_values(stats.forward_wait_seconds + stats.backward_wait_seconds, *world);
        step[emulated] = std::min(step[emulated], wall);
        for (int i = 0; i < c; ++i) {
          computes[i] = std::min(computes[i], compute[i]);
          waits[emulated][i] = std::min(waits[emulated][i], wait[i]);
        }
      }
    }
    world->set_network_emulation(dist::NetworkEmulation{});
    const std::vector<double> work =
        all_values(visible_pairs(cp::rank_positions(f.seq, rank, c, split)), *world);
    if (!lead) continue;
    // What the link added to each rank's waiting, against what the exchange costs alone. (A
    // rank also waits for a neighbour still computing; that is in both modes' waits.)
    double exposed = 0;
    for (int i = 0; i < c; ++i) exposed = std::max(exposed, waits[1][i] - waits[0][i]);
    const double hidden = std::max(0.0, 1 - exposed / alone);
    std::printf("%-10s equality: max |diff| output %.2e, output and q/k/v grads %.2e\n", name.c_str(),
                diff_out, diff);
    std::printf("%-10s per rank: compute", name.c_str());
    for (double x : computes) std::printf(" %.3f", x);
    std::printf(" s; waiting without the link");
    for (double x : waits[0]) std::printf(" %.4f", x);
    std::printf(" s, with it");
    for (double x : waits[1]) std::printf(" %.4f", x);
    std::printf(" s\n");
    std::printf("%-10s overlap: the exchange alone %.4f s; the link added at most %.4f s to a "
                "rank's waiting: hidden %.1f%% (step %.3f s without the link, %.3f s with it)\n",
                name.c_str(), alone, exposed, 100 * hidden, step[0], step[1]);
    std::printf("%-10s imbalance (max / mean): compute time %.3f, visible score pairs %.3f\n",
                name.c_str(), max_of(computes) / mean_of(computes), max_of(work) / mean_of(work));
    std::printf("{\"bench\": \"ring_attention\", \"split\": \"%s\", \"ranks\": %d, \"seq\": %lld, "
                "\"max_abs_diff\": %.3e, \"exchange_alone_s\": %.5f, \"step_s\": %.5f, "
                "\"step_emulated_s\": %.5f, \"hidden\": %.4f, \"compute_imbalance\": %.4f, "
                "\"work_imbalance\": %.4f}\n",
                name.c_str(), c, static_cast<long long>(f.seq), diff, alone, step[0], step[1],
                hidden, max_of(computes) / mean_of(computes), max_of(work) / mean_of(work));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Flags f = parse(argc, argv);
  auto world = dist::init(&argc, &argv);
  const int code = dist::run_or_abort([&] { return run(f, world); });
  dist::finalize();
  return code;
}
