// Ring attention benchmark (dist/context_parallel/ring_attention.h), run under mpirun with C
// ranks: at sequence length s, for the head-tail and the contiguous split,
//   - equality: the ranks' output and q/k/v gradients, gathered, against one process's causal
//     attention on the whole sequence (rank 0 computes it): the largest absolute difference;
//   - overlap: every message under an emulated link (--bandwidth-gbps, --latency-us; the
//     process group holds each send for latency + bytes / bandwidth, network_emulation.h).
//     Each message is set beside its sender's post (the ranks of one machine share the steady
//     clock): its link time runs from the post to its arrival, and the part after the receiver
//     needed it (its compute of the step done) and after the sender posted is exposed; the
//     hidden fraction is 1 - exposed / link time, summed over the messages; and, stricter, the
//     exposed time against the exchange alone (the same messages without compute, whose link
//     time is not stretched by sharing the cores with the compute). A neighbour still computing
//     when this rank needs its block is imbalance, not the link, and is not counted;
//   - causal imbalance: each rank's compute time (the block kernels and the combine step,
//     forward and backward) and its share of the causal mask's visible (query, key) pairs:
//     max / mean over the ranks, with and without head-tail order;
//   - DeepSpeed-Ulysses beside it (ulysses_attention.h): equality, the bytes rank 0 sends (beside
//     ring attention's) and its step without and with the link.
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
#include "dist/context_parallel/ulysses_attention.h"
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
    if (const char* v = value("--seq="))
      number("--seq=", v, int64_t{2}, &f.seq);
    else if (const char* v = value("--heads="))
      number("--heads=", v, int64_t{1}, &f.heads);
    else if (const char* v = value("--head-dim="))
      number("--head-dim=", v, int64_t{1}, &f.head_dim);
    else if (const char* v = value("--batch="))
      number("--batch=", v, int64_t{1}, &f.batch);
    else if (const char* v = value("--threads="))
      number("--threads=", v, 1, &f.threads);
    else if (const char* v = value("--repeats="))
      number("--repeats=", v, 1, &f.repeats);
    else if (const char* v = value("--bandwidth-gbps="))
      f.bandwidth_gbps = std::atof(v);
    else if (const char* v = value("--latency-us="))
      f.latency_us = std::atof(v);
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
    if (lead)
      std::fprintf(stderr, "ring_attention_bench: --seq=%lld does not divide into 2 x %d chunks\n",
                   static_cast<long long>(f.seq), c);
    return 2;
  }
  const Shape shape{f.batch, f.heads, f.seq, f.head_dim};
  const double scale = 1.0 / std::sqrt(static_cast<double>(f.head_dim));
  const Tensor q = random(shape, 1), k = random(shape, 2), v = random(shape, 3),
               g = random(shape, 4);

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
    std::printf(
        "ring attention: s = %lld, B = %lld, H = %lld, D = %lld, C = %d ranks, %d thread(s) "
        "a rank; link %.1f Gb/s, %.0f us; one process fwd+bwd %.3f s\n",
        static_cast<long long>(f.seq), static_cast<long long>(f.batch),
        static_cast<long long>(f.heads), static_cast<long long>(f.head_dim), c, f.threads,
        f.bandwidth_gbps, f.latency_us, one_process_seconds);
  }
  dist::NetworkEmulation net;
  net.bandwidth_gbps = f.bandwidth_gbps;
  net.latency_us = f.latency_us;

  for (const cp::SequenceSplit split :
       {cp::SequenceSplit::kHeadTail, cp::SequenceSplit::kContiguous}) {
    const std::string name = cp::split_name(split);
    const auto mine = [&](const Tensor& x) { return cp::rank_rows(x, 2, rank, c, split); };
    // Equality, without emulation.
    world->set_network_emulation(dist::NetworkEmulation{});
    Variable qr(mine(q), true), kr(mine(k), true), vr(mine(v), true);
    const int64_t bytes_before = world->ledger().total_bytes();
    const Variable out =
        cp::ring_attention(qr, kr, vr, scale, world, cp::RingAttentionOptions().split(split));
    sum(mul(out, Variable(mine(g)))).backward();
    const int64_t ring_bytes = world->ledger().total_bytes() - bytes_before;
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

    // Timing, under the emulated link: the exchange alone; then the ring, whose every message
    // is set beside its sender's post (the ranks share the steady clock). A message's link
    // time runs from its sender's post to its arrival; the part of it after the receiver
    // needed it (its compute of the step done) and after the sender posted (before that, the
    // receiver waits for a neighbour still computing, not for the link) is exposed. This
    // machine is shared, so compute figures are the least of --repeats runs, exposure the sum.
    const Shape kv_shape{2, f.batch, f.heads, f.seq / c, f.head_dim};
    world->set_network_emulation(net);
    double alone = 1e30;
    for (int r = 0; r < f.repeats; ++r) {
      alone = std::min(alone, max_of(all_values(exchange_alone(*world, kv_shape), *world)));
    }
    double step = 1e30;
    std::vector<double> link(c, 0.0), exposed(c, 0.0);  // per receiving rank, summed over runs
    std::vector<double> computes(c, 1e30);
    for (int r = 0; r < f.repeats; ++r) {
      cp::RingAttentionStats stats;
      Variable qt(mine(q), true), kt(mine(k), true), vt(mine(v), true);
      world->barrier()->wait();
      const double start = bench::now_ms();
      const Variable o = cp::ring_attention(qt, kt, vt, scale, world,
                                            cp::RingAttentionOptions().split(split).stats(&stats));
      sum(mul(o, Variable(mine(g)))).backward();
      step = std::min(step, max_of(all_values((bench::now_ms() - start) / 1e3, *world)));
      const std::vector<double> compute =
          all_values(stats.forward_compute_seconds + stats.backward_compute_seconds, *world);
      for (int i = 0; i < c; ++i) computes[i] = std::min(computes[i], compute[i]);
      // Every rank's exchanges (as many on each), 5 numbers each.
      std::vector<double> mine_events;
      for (const auto& e : stats.exchanges) {
        mine_events.insert(mine_events.end(),
                           {double(e.kind), double(e.step), e.posted, e.arrived, e.needed});
      }
      const int64_t n = static_cast<int64_t>(mine_events.size());
      Tensor all = empty({c * n}, kF64);
      world->all_gather(from_vector<double>(mine_events, {n}), all)->wait();
      const std::vector<double> ev = all.to_vector<double>();
      const auto at = [&](int rank_of, int64_t i, int field) {
        return ev[rank_of * n + i * 5 + field];
      };
      for (int rr = 0; rr < c; ++rr) {
        for (int64_t i = 0; i < n / 5; ++i) {
          const int kind = static_cast<int>(at(rr, i, 0)), st = static_cast<int>(at(rr, i, 1));
          // Forward blocks come from the left; backward ones and the accumulators from the right.
          const int sender =
              kind == cp::RingAttentionStats::kForwardKV ? (rr + c - 1) % c : (rr + 1) % c;
          for (int64_t j = 0; j < n / 5; ++j) {
            if (at(sender, j, 0) != kind || at(sender, j, 1) != st) continue;
            const double posted = at(sender, j, 2), arrived = at(rr, i, 3), needed = at(rr, i, 4);
            link[rr] += std::max(0.0, arrived - posted);
            exposed[rr] += std::max(0.0, arrived - std::max(needed, posted));
          }
        }
      }
    }
    world->set_network_emulation(dist::NetworkEmulation{});
    const std::vector<double> work =
        all_values(visible_pairs(cp::rank_positions(f.seq, rank, c, split)), *world);
    if (!lead) continue;
    // Over every rank's messages; and the rank that paid most against the exchange alone.
    const double link_all = mean_of(link) * c, exposed_all = mean_of(exposed) * c;
    const double hidden = link_all > 0 ? 1 - exposed_all / link_all : 1;
    const double paid = max_of(exposed) / f.repeats;
    const double hidden_of_alone = std::max(0.0, 1 - paid / alone);
    std::printf("%-10s equality: max |diff| output %.2e, output and q/k/v grads %.2e; %.2f MB "
                "sent by rank 0 (forward and backward)\n",
                name.c_str(), diff_out, diff, ring_bytes / 1e6);
    std::printf("%-10s per rank: compute", name.c_str());
    for (double x : computes) std::printf(" %.3f", x);
    std::printf(" s; step %.3f s\n", step);
    std::printf(
        "%-10s overlap: messages' link time (all ranks) %.4f s, exposed %.4f s: hidden "
        "%.1f%%; the exchange alone %.4f s a rank, the rank paying most exposed %.4f s of "
        "it: hidden %.1f%%\n",
        name.c_str(), link_all / f.repeats, exposed_all / f.repeats, 100 * hidden, alone, paid,
        100 * hidden_of_alone);
    std::printf("%-10s imbalance (max / mean): compute time %.3f, visible score pairs %.3f\n",
                name.c_str(), max_of(computes) / mean_of(computes), max_of(work) / mean_of(work));
    std::printf(
        "{\"bench\": \"ring_attention\", \"split\": \"%s\", \"ranks\": %d, \"seq\": %lld, "
        "\"max_abs_diff\": %.3e, \"exchange_alone_s\": %.5f, \"step_s\": %.5f, "
        "\"link_s\": %.5f, \"exposed_s\": %.5f, \"hidden\": %.4f, \"hidden_of_alone\": %.4f, "
        "\"compute_imbalance\": %.4f, \"work_imbalance\": %.4f}\n",
        name.c_str(), c, static_cast<long long>(f.seq), diff, alone, step, link_all / f.repeats,
        exposed_all / f.repeats, hidden, hidden_of_alone, max_of(computes) / mean_of(computes),
        max_of(work) / mean_of(work));
  }
  // DeepSpeed-Ulysses beside it (head-tail chunks; the attention is the one-process op on
  // whole sequences of H/C heads, so the order makes no imbalance): equality, bytes, and its
  // step without and with the link (its all-to-alls are not overlapped).
  if (f.heads % c == 0) {
    const cp::SequenceSplit split = cp::SequenceSplit::kHeadTail;
    const auto mine = [&](const Tensor& x) { return cp::rank_rows(x, 2, rank, c, split); };
    double steps[2] = {1e30, 1e30};
    int64_t bytes = 0;
    double diff = 0;
    for (int emulated = 0; emulated < 2; ++emulated) {
      world->set_network_emulation(emulated ? net : dist::NetworkEmulation{});
      for (int r = 0; r < f.repeats; ++r) {
        Variable qr(mine(q), true), kr(mine(k), true), vr(mine(v), true);
        world->barrier()->wait();
        const int64_t before = world->ledger().total_bytes();
        const double start = bench::now_ms();
        const Variable out = cp::ulysses_attention(qr, kr, vr, scale, world, split);
        sum(mul(out, Variable(mine(g)))).backward();
        steps[emulated] =
            std::min(steps[emulated], max_of(all_values((bench::now_ms() - start) / 1e3, *world)));
        bytes = world->ledger().total_bytes() - before;
        if (emulated == 0 && r == 0) {
          const Tensor got = cp::gather_sequence(out.data(), 2, *world, split);
          const Tensor got_dq = cp::gather_sequence(qr.grad(), 2, *world, split);
          const Tensor got_dk = cp::gather_sequence(kr.grad(), 2, *world, split);
          const Tensor got_dv = cp::gather_sequence(vr.grad(), 2, *world, split);
          if (lead) {
            diff = std::max({max_abs_diff(got, ref_out), max_abs_diff(got_dq, ref_dq),
                             max_abs_diff(got_dk, ref_dk), max_abs_diff(got_dv, ref_dv)});
          }
        }
      }
    }
    world->set_network_emulation(dist::NetworkEmulation{});
    if (lead) {
      std::printf("ulysses    equality: max |diff| output and q/k/v grads %.2e; %.2f MB sent by "
                  "rank 0; step %.3f s without the link, %.3f s with it\n",
                  diff, bytes / 1e6, steps[0], steps[1]);
      std::printf("{\"bench\": \"ulysses_attention\", \"ranks\": %d, \"seq\": %lld, "
                  "\"max_abs_diff\": %.3e, \"bytes\": %lld, \"step_s\": %.5f, "
                  "\"step_emulated_s\": %.5f}\n",
                  c, static_cast<long long>(f.seq), diff, static_cast<long long>(bytes), steps[0],
                  steps[1]);
    }
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
