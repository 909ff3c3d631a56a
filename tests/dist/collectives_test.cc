// Collectives of ProcessGroupMPI against values computed by hand, for every dtype and for sizes
// that do not divide by the group size; the byte ledger against the ring algorithm's theory;
// point to point with tags; sub-groups and the topology.
#include <gtest/gtest.h>

#include <functional>
#include <numeric>

#include "dist/environment.h"
#include "dist/reduce_scalar.h"
#include "dist/settings_check.h"
#include "dist/topology.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {
namespace {

const std::vector<DType> kDtypes = {kF32, kF64, kF16, kBF16, kI64};
const std::vector<int64_t> kSizes = {0, 1, 7, 1000};

// rank r holds x_i = 10 r + (i mod 8): sums over 4 ranks stay below 256, exact even in bf16.
double v(int64_t i) { return static_cast<double>(i % 8); }
Tensor rank_values(int64_t n, int rank, DType dtype) {
  std::vector<double> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = 10.0 * rank + v(i);
  return from_vector<double>(x, {n}).to(dtype);
}

TEST(Collectives, AllReduceSumAvgMaxMin) {
  auto world = dist::world();
  const int N = world->size(), r = world->rank();
  for (DType dtype : kDtypes) {
    for (int64_t n : kSizes) {
      Tensor sum_t = rank_values(n, r, dtype);
      world->all_reduce(sum_t, ReduceOp::kSum)->wait();
      Tensor max_t = rank_values(n, r, dtype), min_t = rank_values(n, r, dtype);
      world->all_reduce(max_t, ReduceOp::kMax)->wait();
      world->all_reduce(min_t, ReduceOp::kMin)->wait();
      const std::vector<double> s = sum_t.to_vector<double>(), mx = max_t.to_vector<double>(),
                                mn = min_t.to_vector<double>();
      for (int64_t i = 0; i < n; ++i) {
        // sum_r (10 r + v_i) = 10 N (N-1) / 2 + N v_i
        EXPECT_EQ(s[i], 10.0 * N * (N - 1) / 2 + N * v(i)) << dtype_name(dtype) << " n=" << n;
        EXPECT_EQ(mx[i], 10.0 * (N - 1) + v(i));
        EXPECT_EQ(mn[i], v(i));
      }
      if (is_floating(dtype)) {
        Tensor avg = rank_values(n, r, dtype);
        world->all_reduce(avg, ReduceOp::kMean)->wait();
        for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(avg.to_vector<double>()[i], 5.0 * (N - 1) + v(i), 0.05);
      }
    }
  }
}

TEST(Collectives, ReduceScatterAndAllGatherWithUnevenCounts) {
  auto world = dist::world();
  const int N = world->size(), r = world->rank();
  for (DType dtype : kDtypes) {
    for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{1001}}) {
      const std::vector<int64_t> counts = balanced_counts(n, N);
      const int64_t start = std::accumulate(counts.begin(), counts.begin() + r, int64_t{0});
      Tensor in = rank_values(n, r, dtype);
      Tensor out = empty({counts[r]}, dtype);
      world->reduce_scatter(in, out, counts, ReduceOp::kSum)->wait();
      EXPECT_EQ(in.to_vector<double>(), rank_values(n, r, dtype).to_vector<double>());  // intact
      for (int64_t i = 0; i < counts[r]; ++i) {
        EXPECT_EQ(out.to_vector<double>()[i], 10.0 * N * (N - 1) / 2 + N * v(start + i));
      }
      Tensor gathered = empty({n}, dtype);
      world->all_gather(out, gathered, counts)->wait();
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_EQ(gathered.to_vector<double>()[i], 10.0 * N * (N - 1) / 2 + N * v(i));
      }
    }
  }
  // Explicit, very uneven counts (one rank gets nothing).
  std::vector<int64_t> counts(N, 2);
  counts[0] = 0;
  counts[N - 1] = 5;
  const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  Tensor gathered = empty({total});
  world->all_gather(full({counts[r]}, r, kF32), gathered, counts)->wait();
  int64_t at = 0;
  for (int k = 0; k < N; ++k) {
    for (int64_t i = 0; i < counts[k]; ++i) EXPECT_EQ(gathered.at({at++}), k);
  }
}

TEST(Collectives, BroadcastFromEveryRoot) {
  auto world = dist::world();
  for (int root = 0; root < world->size(); ++root) {
    Tensor t = world->rank() == root ? arange(0, 9, 1, kF32) : zeros({9});
    world->broadcast(t, root)->wait();
    EXPECT_EQ(t.to_vector<float>(), arange(0, 9, 1, kF32).to_vector<float>()) << "root " << root;
  }
}

TEST(Collectives, TaggedSendRecvAroundTheRing) {
  auto world = dist::world();
  const int N = world->size(), r = world->rank();
  // Two messages with different tags, received in the opposite order to the sends.
  Tensor a = full({4}, 100 + r), b = full({3}, 200 + r, kF64);
  auto s1 = world->send(a, (r + 1) % N, 1);
  auto s2 = world->send(b, (r + 1) % N, 2);
  Tensor got_b = empty({3}, kF64), got_a = empty({4});
  auto r2 = world->recv(got_b, (r + N - 1) % N, 2);
  auto r1 = world->recv(got_a, (r + N - 1) % N, 1);
  for (auto& w : {s1, s2, r1, r2}) w->wait();
  EXPECT_EQ(got_a.at({0}), 100 + (r + N - 1) % N);
  EXPECT_EQ(got_b.at({2}), 200 + (r + N - 1) % N);
  world->barrier()->wait();
}

TEST(Collectives, LedgerMatchesTheRingAlgorithm) {
  auto world = dist::world();
  const int N = world->size();
  world->ledger().reset();
  const int64_t n = 1200 * N;  // divisible: exactly 2 (N-1)/N of the bytes per all-reduce
  Tensor t = ones({n});
  world->all_reduce(t)->wait();
  world->all_reduce(t)->wait();
  const LedgerEntry e = world->ledger().entry(CollectiveKind::kAllReduce);
  EXPECT_EQ(e.calls, 2);
  EXPECT_EQ(e.bytes, 2 * (2 * (N - 1) * n * 4 / N));
  // reduce-scatter + all-gather move the same bytes as one all-reduce.
  world->ledger().reset();
  Tensor part = empty({n / N});
  world->reduce_scatter(t, part)->wait();
  world->all_gather(part, t)->wait();
  EXPECT_EQ(world->ledger().total_bytes(), 2 * (N - 1) * n * 4 / N);
  EXPECT_NE(world->ledger().str().find("reduce_scatter 1 calls"), std::string::npos);
}

TEST(Collectives, SubGroupsAndTopology) {
  auto world = dist::world();
  const int N = world->size();
  if (N < 2 || N % 2 != 0) GTEST_SKIP() << "needs an even number of ranks";
  Topology topo(world, 2);  // 2 stages x N/2 replicas
  EXPECT_EQ(topo.data_parallel_size(), N / 2);
  EXPECT_EQ(topo.stage(), world->rank() / (N / 2));
  // Sum of world ranks within the data-parallel group of this stage.
  Tensor t = scalar_tensor(world->rank(), kI64);
  topo.data_parallel_group()->all_reduce(t)->wait();
  const int base = topo.stage() * (N / 2);
  EXPECT_EQ(t.item(), (N / 2) * base + (N / 2) * (N / 2 - 1) / 2);
  Tensor u = scalar_tensor(world->rank(), kI64);
  topo.pipeline_group()->all_reduce(u)->wait();
  EXPECT_EQ(u.item(), 2 * topo.replica() + N / 2);
  EXPECT_EQ(topo.pipeline_group()->world_ranks()[1], N / 2 + topo.replica());
}

TEST(Collectives, AllReduceScalar) {
  auto world = dist::world();
  const int n = world->size(), r = world->rank();
  EXPECT_DOUBLE_EQ(all_reduce_scalar(r + 1.0, *world), n * (n + 1) / 2.0);
  EXPECT_DOUBLE_EQ(all_reduce_scalar(r + 1.0, *world, ReduceOp::kMean), (n + 1) / 2.0);
  EXPECT_DOUBLE_EQ(all_reduce_scalar(r + 1.0, *world, ReduceOp::kMax), n);
}

TEST(SettingsCheck, RanksThatDisagreeAreToldWhatAndWhere) {
  auto world = dist::world();
  const int n = world->size(), r = world->rank();
  Settings same = {{"strategy", "ddp"}, {"batch_size", "64"}, {"model", "mlp"}};
  EXPECT_NO_THROW(verify_same_settings(same, *world));
  // The last rank was started with another batch size: every rank gets the same message.
  Settings differ = same;
  if (r == n - 1) differ[1].second = "32";
  std::string message;
  try {
    verify_same_settings(differ, *world);
  } catch (const Error& e) {
    message = e.what();
  }
  if (n == 1) {
    EXPECT_EQ(message, "");
    return;
  }
  std::string ranks;
  for (int k = 0; k < n - 1; ++k) ranks += (k ? ", " : "") + std::to_string(k);
  const std::string expected = "ranks disagree on \"batch_size\": 64 on rank" +
                               std::string(n > 2 ? "s " : " ") + ranks + "; 32 on rank " +
                               std::to_string(n - 1);
  EXPECT_NE(message.find(expected), std::string::npos) << message;
  // A setting only rank 0 has.
  Settings extra = same;
  if (r == 0) extra.push_back({"amp", "bf16"});
  try {
    verify_same_settings(extra, *world);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("\"amp\": bf16 on rank 0; (missing) on rank"),
              std::string::npos) << e.what();
  }
}

TEST(Collectives, BadArgumentsAreErrorsBeforeAnyCommunication) {
  auto world = dist::world();
  EXPECT_THROW(world->reduce_scatter(ones({10}), empty({3}), std::vector<int64_t>(world->size(), 1)),
               Error);
  EXPECT_THROW(world->all_reduce(ones({4}).t().contiguous().view({2, 2}).t()), Error);  // strided
  EXPECT_THROW(world->all_reduce(ones({4}, kI64), ReduceOp::kMean), Error);
  EXPECT_THROW(world->broadcast(ones({1}), world->size()), Error);
  EXPECT_THROW(world->send(ones({1}), world->rank(), 0), Error);
}

// The collectives take tensor/kinds.h's ReduceOp, the one enum: its kernel-only members are
// refused by name of the collective before anything is sent, as is kMean on integers.
TEST(Collectives, OnlyTheFourCollectiveReductionsAreAccepted) {
  auto world = dist::world();
  auto message = [](const std::function<void()>& f) -> std::string {
    try {
      f();
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  for (ReduceOp op : {ReduceOp::kArgmax, ReduceOp::kArgmin, ReduceOp::kVar}) {
    const std::string m = message([&] { world->all_reduce(ones({4}), op); });
    EXPECT_NE(m.find("all_reduce: ReduceOp " + std::to_string(static_cast<int>(op)) +
                     " is not a collective reduction (kSum, kMean, kMax or kMin)"),
              std::string::npos) << m;
  }
  const std::string m = message([&] { world->reduce_scatter(ones({8}), empty({8 / world->size()}),
                                                            ReduceOp::kMean); });
  EXPECT_EQ(m, "no error");
  const std::string integer = message([&] {
    world->reduce_scatter(ones({8}, kI64), empty({8 / world->size()}, kI64), ReduceOp::kMean);
  });
  EXPECT_NE(integer.find("reduce_scatter: kMean needs a floating-point tensor, got i64"),
            std::string::npos) << integer;
}

}  // namespace
}  // namespace dist
}  // namespace tessera
