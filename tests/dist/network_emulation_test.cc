// Network emulation in the MPI process group (dist/network_emulation.h): every operation takes
// at least its model's time (all_reduce 2 (N-1) (L + n/(N B)), reduce_scatter and all_gather
// (N-1) (L + n/(N B)), a broadcast's tree, a barrier's rounds, a point-to-point message L + b/B
// from its sender's post, messages on one link one after another); results are bit-equal with
// and without it; the ledger's emulated time is the model's sum; bad settings are errors naming
// the value; off, nothing changes. Times are checked as lower bounds (hard) and loosely from
// above (this machine is small and shared).
//
// Times across ranks compare steady_clock readings of different processes: under mpirun on one
// machine they read the same CLOCK_MONOTONIC.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <thread>

#include "dist/environment.h"
#include "dist/topology.h"
#include "tensor/ops.h"
#include "tests/util/expect_error.h"

namespace tessera {
namespace dist {
namespace {

using ::tessera::testing::expect_error;

constexpr double kLatencyUs = 500;
constexpr double kBandwidthGbps = 1;  // 125 MB/s: a 1 MB message flies for 8 ms
const NetworkEmulation kSlow{kLatencyUs, kBandwidthGbps};

// The model, written out independently of the library: seconds for one message of `bytes`.
double msg(double bytes, double latency_us = kLatencyUs, double bandwidth_gbps = kBandwidthGbps) {
  return latency_us * 1e-6 + bytes * 8 / (bandwidth_gbps * 1e9);
}

// Broadcast's binomial tree from root 0: how many messages rank v sends, and after how many
// message times (from the root's post) it has the data.
int broadcast_sends(int v, int n) {
  int sends = 0;
  for (int mask = 1; mask < n; mask <<= 1) sends += (v < mask && v + mask < n) ? 1 : 0;
  return sends;
}
int broadcast_depth(int v) { return v == 0 ? 0 : static_cast<int>(std::floor(std::log2(v))) + 1; }
int ceil_log2(int n) {
  int rounds = 0;
  for (int reach = 1; reach < n; reach <<= 1) ++rounds;
  return rounds;
}

// Wall seconds of `op` on this rank, the group's ranks lined up by a barrier first.
double timed_on(ProcessGroup& group, const std::function<void()>& op) {
  group.barrier()->wait();
  const double start = steady_seconds();
  op();
  return steady_seconds() - start;
}
double timed(const std::function<void()>& op) { return timed_on(*world(), op); }

// A value every rank learns from rank `from` (a time on the shared clock).
double from_rank(double value, int from) {
  Tensor t = scalar_tensor(world()->rank() == from ? value : 0.0, kF64);
  world()->all_reduce(t, ReduceOp::kSum)->wait();
  return t.item();
}

void report(const char* what, int64_t bytes, double bound, double measured) {
  if (world()->rank() != 0) return;
  std::printf("[N=%d] %-16s %9lld bytes  bound %8.3f ms  measured %8.3f ms  (x%.2f)\n",
              world()->size(), what, static_cast<long long>(bytes), bound * 1e3, measured * 1e3,
              measured / bound);
}

// Runs `op` once untimed, then kRuns times timed: every run takes at least `bound`, the fastest
// at most 3 bound + 50 ms (single runs on this shared 2-core machine can be much slower).
constexpr int kRuns = 3;
void expect_takes(const char* what, int64_t bytes, double bound, const std::function<void()>& op) {
  op();
  double fastest = 1e9;
  for (int run = 0; run < kRuns; ++run) {
    const double seconds = timed(op);
    EXPECT_GE(seconds, bound) << what << ", run " << run;
    fastest = std::min(fastest, seconds);
  }
  EXPECT_LE(fastest, 3 * bound + 0.05) << what;
  report(what, bytes, bound, fastest);
}

class NetworkEmulationTest : public ::testing::Test {
 protected:
  void TearDown() override {
    set_network_emulation(NetworkEmulation{});
    world()->barrier()->wait();
  }
};

Tensor values(int64_t n, int rank) {
  Generator g(17 + rank);
  return randn({n}, kF32, &g);
}

bool bit_equal(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

TEST(NetworkEmulationSettings, TheModelAndItsChecks) {
  EXPECT_FALSE(NetworkEmulation{}.enabled());
  EXPECT_EQ(NetworkEmulation{}.str(), "off");
  EXPECT_FALSE((NetworkEmulation{0, std::numeric_limits<double>::infinity()}.enabled()));
  EXPECT_TRUE((NetworkEmulation{0, 10}.enabled()));
  EXPECT_TRUE(NetworkEmulation{1}.enabled());
  // 50 us + 8e6 bits at 1e10 bits/s.
  EXPECT_NEAR((NetworkEmulation{50, 10}.message_seconds(1000000)), 850e-6, 1e-15);
  EXPECT_DOUBLE_EQ(NetworkEmulation{50}.message_seconds(1 << 30), 50e-6);  // unlimited bandwidth
  EXPECT_EQ((NetworkEmulation{50, 10}.str()), "latency 50 us, bandwidth 10 Gb/s");
  EXPECT_EQ(NetworkEmulation{50}.str(), "latency 50 us, bandwidth unlimited");
}

TEST_F(NetworkEmulationTest, BadSettingsAreErrorsNamingTheValue) {
  auto w = world();
  expect_error([&] { w->set_network_emulation(NetworkEmulation{-5, 10}); },
               "set_network_emulation: network latency must be a finite number of microseconds "
               ">= 0, got latency_us = -5");
  expect_error([&] { set_network_emulation(NetworkEmulation{10, 0}); },
               "dist::set_network_emulation: network bandwidth must be > 0 Gb/s (infinity for "
               "unlimited), got bandwidth_gbps = 0");
  expect_error([&] { set_network_emulation(NetworkEmulation{10, -2.5}); }, "bandwidth_gbps = -2.5");
  expect_error([&] { set_network_emulation(NetworkEmulation{NAN, 1}); }, "latency_us = nan");
  expect_error([&] { set_network_emulation(NetworkEmulation{0, NAN}); }, "bandwidth_gbps = nan");
  expect_error([&] { set_network_emulation(NetworkEmulation{INFINITY, 1}); }, "latency_us = inf");
  // Nothing was changed by a refused setting.
  EXPECT_FALSE(w->network_emulation().enabled());
}

TEST_F(NetworkEmulationTest, OffByDefaultAndOffChangesNothing) {
  auto w = world();
  const int N = w->size();
  EXPECT_FALSE(w->network_emulation().enabled());
  w->ledger().reset();
  const int64_t n = 1200 * N;
  Tensor t = ones({n});
  w->all_reduce(t)->wait();
  Tensor part = empty({n / N});
  w->reduce_scatter(t, part)->wait();
  w->all_gather(part, t)->wait();
  w->broadcast(t, 0)->wait();
  EXPECT_EQ(w->ledger().entry(CollectiveKind::kAllReduce).bytes, 2 * (N - 1) * n * 4 / N);
  EXPECT_EQ(w->ledger().entry(CollectiveKind::kReduceScatter).bytes, (N - 1) * n * 4 / N);
  EXPECT_EQ(w->ledger().entry(CollectiveKind::kAllGather).bytes, (N - 1) * n * 4 / N);
  EXPECT_EQ(w->ledger().entry(CollectiveKind::kBroadcast).bytes,
            broadcast_sends(w->rank(), N) * n * 4);
  EXPECT_EQ(w->ledger().emulated_seconds(), 0.0);
  EXPECT_EQ(w->ledger().str().find("emulated"), std::string::npos) << w->ledger().str();
  EXPECT_EQ(t.at({0}), static_cast<double>(N) * N);

  // On, then off again: what is issued after is not emulated (and point-to-point, now through
  // the group's delay line, still arrives in order).
  w->set_network_emulation(NetworkEmulation{100, 10});
  w->all_reduce(t)->wait();
  w->set_network_emulation(NetworkEmulation{});
  EXPECT_FALSE(w->network_emulation().enabled());
  w->ledger().reset();
  w->all_reduce(t)->wait();
  const int r = w->rank();
  auto s1 = w->send(full({3}, 10 + r), (r + 1) % N, 1);
  auto s2 = w->send(full({3}, 20 + r), (r + 1) % N, 1);
  Tensor a = empty({3}), b = empty({3});
  w->recv(a, (r + N - 1) % N, 1)->wait();
  w->recv(b, (r + N - 1) % N, 1)->wait();
  s1->wait();
  s2->wait();
  EXPECT_EQ(a.at({0}), 10 + (r + N - 1) % N);  // same tag: in the order sent
  EXPECT_EQ(b.at({0}), 20 + (r + N - 1) % N);
  EXPECT_EQ(w->ledger().emulated_seconds(), 0.0);
}

TEST_F(NetworkEmulationTest, ResultsAreBitEqualWithAndWithoutIt) {
  auto w = world();
  const int N = w->size(), r = w->rank();
  const int64_t n = 1001;  // not divisible: uneven chunks
  auto run = [&](std::vector<Tensor>& out) {
    Tensor sum = values(n, r), mean = values(n, r), part = empty({balanced_counts(n, N)[r]});
    w->all_reduce(sum)->wait();
    w->all_reduce(mean, ReduceOp::kMean)->wait();
    w->reduce_scatter(values(n, r), part)->wait();
    Tensor gathered = empty({n});
    w->all_gather(part, gathered)->wait();
    Tensor root = r == N - 1 ? values(n, r) : zeros({n});
    w->broadcast(root, N - 1)->wait();
    Tensor got = empty({n});
    auto s = w->send(values(n, r), (r + 1) % N, 3);
    w->recv(got, (r + N - 1) % N, 3)->wait();
    s->wait();
    out = {sum, mean, part, gathered, root, got};
  };
  std::vector<Tensor> off, on;
  run(off);
  w->set_network_emulation(NetworkEmulation{20, 100});
  run(on);
  for (size_t i = 0; i < off.size(); ++i) EXPECT_TRUE(bit_equal(off[i], on[i])) << "result " << i;
}

TEST_F(NetworkEmulationTest, RingCollectivesTakeAtLeastTheirModelTime) {
  auto w = world();
  const int N = w->size();
  set_network_emulation(kSlow);
  // Divisible by 2 and 3: every ring step sends exactly n/N bytes.
  for (int64_t elements : {int64_t{6 * 1024}, int64_t{6 * 65536}}) {
    const double bytes = elements * 4.0;
    Tensor t = values(elements, w->rank());
    expect_takes("all_reduce", elements * 4, 2 * (N - 1) * msg(bytes / N),
                 [&] { w->all_reduce(t)->wait(); });
    Tensor part = empty({elements / N});
    expect_takes("reduce_scatter", elements * 4, (N - 1) * msg(bytes / N),
                 [&] { w->reduce_scatter(t, part)->wait(); });
    expect_takes("all_gather", elements * 4, (N - 1) * msg(bytes / N),
                 [&] { w->all_gather(part, t)->wait(); });
  }
}

TEST_F(NetworkEmulationTest, BroadcastFollowsItsTreeAndBarrierItsRounds) {
  auto w = world();
  const int N = w->size(), r = w->rank();
  set_network_emulation(kSlow);
  const int64_t elements = 32 * 1024;  // 128 KB: 0.5 ms + 1.05 ms per message
  const double one = msg(elements * 4.0);
  // The root holds one message per child, one after another.
  Tensor t = r == 0 ? values(elements, 0) : zeros({elements});
  expect_takes(r == 0 ? "broadcast root" : "broadcast", elements * 4,
               r == 0 ? broadcast_sends(0, N) * one : 0, [&] { w->broadcast(t, 0)->wait(); });
  EXPECT_TRUE(bit_equal(t, values(elements, 0)));
  // Every rank has the data no earlier than its depth in the tree after the root posted, and
  // then forwards it to its own children.
  const double bound = (broadcast_depth(r) + broadcast_sends(r, N)) * one;
  double fastest = 1e9;
  for (int run = 0; run < kRuns; ++run) {
    w->barrier()->wait();
    const double posted = steady_seconds();
    w->broadcast(t, 0)->wait();
    const double done = steady_seconds();
    const double root_posted = from_rank(posted, 0);
    EXPECT_GE(done - root_posted, bound) << "rank " << r << ", run " << run;
    fastest = std::min(fastest, done - root_posted);
  }
  EXPECT_LE(fastest, 3 * bound + 0.05) << "rank " << r;
  expect_takes("barrier", 0, ceil_log2(N) * kLatencyUs * 1e-6, [&] { w->barrier()->wait(); });
}

TEST_F(NetworkEmulationTest, PointToPointArrivesNoEarlierThanItsSenderPostedPlusItsTime) {
  auto w = world();
  const int r = w->rank();
  w->set_network_emulation(kSlow);  // on the world only: the others never send here
  const int64_t elements = 64 * 1024, second = 16 * 1024;  // 256 KB: 0.5 ms + 2.1 ms; 64 KB
  const double one = msg(elements * 4.0), both = msg((elements + second) * 4.0);
  const Tensor payload = values(elements, 0), tail = values(second, 0);
  double fastest_send = 1e9, fastest_recv = 1e9, fastest_both = 1e9;
  for (int run = 0; run < kRuns; ++run) {
    // The receiver posts first (it waits for the sender, as a pipeline stage waits for its
    // activations): its message still takes the whole time from the sender's post.
    double posted = 0, received = 0;
    w->barrier()->wait();
    if (r == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      posted = steady_seconds();
      w->send(payload, 1, 9)->wait();
      const double sent = steady_seconds() - posted;
      EXPECT_GE(sent, one) << "send, run " << run;
      fastest_send = std::min(fastest_send, sent);
    } else if (r == 1) {
      Tensor got = empty({elements});
      w->recv(got, 0, 9)->wait();
      received = steady_seconds();
      EXPECT_TRUE(bit_equal(got, payload));
    }
    const double sender_posted = from_rank(posted, 0);
    if (r == 1) {
      EXPECT_GE(received - sender_posted, one) << "recv, run " << run;
      fastest_recv = std::min(fastest_recv, received - sender_posted);
    }

    // Two back-to-back sends share the link: the second is transmitted after the first.
    w->barrier()->wait();
    if (r == 0) {
      posted = steady_seconds();
      auto a = w->send(payload, 1, 10);
      auto b = w->send(tail, 1, 11);
      a->wait();
      b->wait();
    } else if (r == 1) {
      Tensor b = empty({second}), a = empty({elements});
      w->recv(b, 0, 11)->wait();  // the second message, received first
      received = steady_seconds();
      w->recv(a, 0, 10)->wait();
      EXPECT_TRUE(bit_equal(b, tail));
      EXPECT_TRUE(bit_equal(a, payload));
    }
    const double pair_posted = from_rank(posted, 0);
    if (r == 1) {
      EXPECT_GE(received - pair_posted, both) << "the second message on one link, run " << run;
      fastest_both = std::min(fastest_both, received - pair_posted);
    }
  }
  if (r == 0) {
    EXPECT_LE(fastest_send, 3 * one + 0.05);
  } else if (r == 1) {
    EXPECT_LE(fastest_recv, 3 * one + 0.05);
    EXPECT_LE(fastest_both, 3 * both + 0.05);
  }
  report("send", elements * 4, one, fastest_send);
  report("recv", elements * 4, one, from_rank(fastest_recv, 1));
  report("2 sends, 1 link", (elements + second) * 4, both, from_rank(fastest_both, 1));
}

TEST_F(NetworkEmulationTest, LedgerRecordsTheModelTimeOfEveryMessageSent) {
  auto w = world();
  const int N = w->size(), r = w->rank();
  const NetworkEmulation e{30, 8};
  const auto m = [&](double bytes) { return msg(bytes, 30, 8); };
  set_network_emulation(e);
  w->ledger().reset();
  // An all-reduce of uneven chunks: in reduce-scatter step s rank r sends chunk r-1-s, in
  // all-gather step s chunk r-s (process_group_mpi.h).
  const int64_t n = 1001;
  const std::vector<int64_t> counts = balanced_counts(n, N);
  Tensor t = values(n, r);
  w->all_reduce(t)->wait();
  double all_reduce = 0;
  for (int s = 0; s < N - 1; ++s) {
    all_reduce += m(counts[((r - 1 - s) % N + N) % N] * 4.0);
    all_reduce += m(counts[((r - s) % N + N) % N] * 4.0);
  }
  Tensor part = empty({counts[r]});
  w->reduce_scatter(t, part)->wait();
  w->all_gather(part, t)->wait();
  double reduce_scatter = 0, all_gather = 0;
  for (int s = 0; s < N - 1; ++s) {
    reduce_scatter += m(counts[((r - 1 - s) % N + N) % N] * 4.0);
    all_gather += m(counts[((r - s) % N + N) % N] * 4.0);
  }
  w->broadcast(t, 0)->wait();
  const double broadcast = broadcast_sends(r, N) * m(n * 4.0);
  // Rank 0 sends 100 f64 to rank 1, and an empty message (latency only).
  if (r == 0) {
    w->send(ones({100}, kF64), 1, 4)->wait();
    w->send(empty({0}), 1, 5)->wait();
  } else if (r == 1) {
    w->recv(empty({100}, kF64), 0, 4)->wait();
    w->recv(empty({0}), 0, 5)->wait();
  }
  const double send = r == 0 ? m(800) + m(0) : 0;
  w->barrier()->wait();  // sends no payload: not in the ledger

  const ByteLedger& ledger = w->ledger();
  const auto near = [](double got, double want) { EXPECT_NEAR(got, want, 1e-12 + 1e-9 * want); };
  near(ledger.entry(CollectiveKind::kAllReduce).emulated_seconds, all_reduce);
  near(ledger.entry(CollectiveKind::kReduceScatter).emulated_seconds, reduce_scatter);
  near(ledger.entry(CollectiveKind::kAllGather).emulated_seconds, all_gather);
  near(ledger.entry(CollectiveKind::kBroadcast).emulated_seconds, broadcast);
  near(ledger.entry(CollectiveKind::kSendRecv).emulated_seconds, send);
  near(ledger.emulated_seconds(), all_reduce + reduce_scatter + all_gather + broadcast + send);
  // Bytes are what they are without emulation.
  EXPECT_EQ(ledger.entry(CollectiveKind::kAllReduce).bytes,
            (2 * n - counts[r] - counts[(r + 1) % N]) * 4);
  EXPECT_NE(ledger.str().find("ms emulated"), std::string::npos) << ledger.str();
}

TEST_F(NetworkEmulationTest, GroupsInheritTheWorldsSettingAndCanHaveTheirOwn) {
  auto w = world();
  const int N = w->size();
  const NetworkEmulation e{40, 25};
  set_network_emulation(e);
  EXPECT_EQ(w->network_emulation().latency_us, 40);
  EXPECT_EQ(w->network_emulation().bandwidth_gbps, 25);
  // A group made afterwards starts with the world's setting.
  auto pair = new_group({0, 1});
  if (w->rank() < 2) {
    ASSERT_NE(pair, nullptr);
    EXPECT_EQ(pair->network_emulation().latency_us, 40);
    EXPECT_EQ(pair->network_emulation().bandwidth_gbps, 25);
    // Its own setting leaves the world's alone ("inter-node" slower than "intra-node").
    pair->set_network_emulation(kSlow);
    EXPECT_EQ(w->network_emulation().latency_us, 40);
    Tensor x = ones({6 * 1024});
    const double seconds = timed_on(*pair, [&] { pair->all_reduce(x)->wait(); });
    EXPECT_GE(seconds, 2 * msg(6 * 1024 * 4.0 / 2));
    EXPECT_EQ(x.at({0}), 2);
  }
  if (N % 2 == 0) {
    Topology topology(w, 2);
    EXPECT_EQ(topology.data_parallel_group()->network_emulation().latency_us, 40);
    EXPECT_EQ(topology.pipeline_group()->network_emulation().bandwidth_gbps, 25);
  }
  // Setting it for everything reaches groups made before too.
  set_network_emulation(NetworkEmulation{});
  if (pair) {
    EXPECT_FALSE(pair->network_emulation().enabled());
  }
}

}  // namespace
}  // namespace dist
}  // namespace tessera
