// A step whose gradients are not finite leaves no trace in a compression hook (issue 49). With
// fp16 one rank's gradient overflows now and then; the GradScaler sees inf/NaN and skips the
// step. The hooks must then keep their state (error-feedback residuals, PowerSGD's warm-start Q,
// step and iteration counters) as it was, on every rank, including the ranks whose own gradient
// was finite and which learn of the overflow only from the exchange.
//
// The check, on 2 and 3 ranks: hook A sees steps 0..6, with an inf on one rank at steps 1 and 3
// (a different rank each time); hook B, built alike, sees only steps 0, 2, 4, 5, 6. A's result
// at steps 1 and 3 is not finite on every rank (so every rank's scaler skips), and afterwards A
// and B hold the same state and give the same results, bit for bit, as if A never saw the
// overflows. Before the fix A's residuals and Qs held NaN from step 1 on (every later step NaN),
// and QSGD's step counter had moved on (other random draws).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "dist/compression/make_hook.h"
#include "dist/compression/powersgd.h"
#include "dist/environment.h"
#include "tensor/ops.h"
#include "tensor/random.h"

namespace tessera {
namespace dist {
namespace compression {
namespace {

// Two buckets a step, each a [6, 8] weight (PowerSGD compresses it at rank 1) and a [6] bias.
constexpr size_t kBuckets = 2;
constexpr int64_t kRows = 6, kCols = 8, kNumel = kRows * kCols + kRows;
constexpr int kSteps = 7;

bool finite(const Tensor& t) {
  for (float v : t.contiguous().to_vector<float>()) {
    if (!std::isfinite(v)) return false;
  }
  return true;
}

// This rank's gradient for a bucket at a step; `overflow` puts an inf in the weight.
GradBucket bucket(int step, size_t index, bool overflow) {
  Generator g(1000 * step + 10 * index + world()->rank());
  GradBucket b;
  b.index = index;
  b.buffer = randn({kNumel}, kF32, &g);
  if (overflow) b.buffer.narrow(0, 5, 1).fill_(std::numeric_limits<float>::infinity());
  b.gradients = {b.buffer.narrow(0, 0, kRows * kCols).view({kRows, kCols}),
                 b.buffer.narrow(0, kRows * kCols, kRows)};
  return b;
}

// Steps 1 and 3 overflow, each on another rank.
bool overflows(int step) {
  return (step == 1 && world()->rank() == 1 % world()->size()) ||
         (step == 3 && world()->rank() == world()->size() - 1);
}

// The hook's result for every bucket of each step in `steps`, as DDP would see it.
std::vector<Tensor> run(CommunicationHook& hook, const std::vector<int>& steps) {
  std::vector<Tensor> results;
  for (int step : steps) {
    for (size_t index = 0; index < kBuckets; ++index) {
      GradBucket b = bucket(step, index, overflows(step));
      hook.reduce(*world(), b)->wait();
      results.push_back(b.buffer.clone());
    }
  }
  return results;
}

bool identical(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  if (a.dtype() == kI64) return a.to_vector<int64_t>() == b.to_vector<int64_t>();
  return a.contiguous().to_vector<float>() == b.contiguous().to_vector<float>();
}

void expect_same_state(const StateDict& a, const StateDict& b, const std::string& what) {
  std::set<std::string> keys_a, keys_b;
  for (const auto& [key, t] : a) keys_a.insert(key);
  for (const auto& [key, t] : b) keys_b.insert(key);
  ASSERT_EQ(keys_a, keys_b) << what;
  for (const auto& [key, t] : a) {
    EXPECT_TRUE(identical(t, b.at(key))) << what << ": " << key << " " << t.str() << " vs "
                                         << b.at(key).str();
    if (t.dtype() == kF32) EXPECT_TRUE(finite(t)) << what << ": " << key;
  }
}

std::vector<std::shared_ptr<CommunicationHook>> hooks() {
  std::vector<std::shared_ptr<CommunicationHook>> out;
  // Error feedback on each transport and kind: all-gather (top-k, sign), all-reduce (random-k,
  // which may not even pick the inf; fp16); QSGD (no residual: its step counter keys its draws).
  out.push_back(make_compression_hook(parse_compression("topk:0.25")));
  out.push_back(make_compression_hook(parse_compression("sign")));
  out.push_back(make_compression_hook(parse_compression("randomk:0.25"), true, 3));
  out.push_back(make_compression_hook(parse_compression("fp16"), true));
  out.push_back(make_compression_hook(parse_compression("qsgd:4:16"), std::nullopt, 5));
  // PowerSGD: step 1 is a plain all-reduce (iteration 1 < 2), step 3 a compressed one.
  out.push_back(std::make_shared<PowerSGDHook>(
      PowerSGDOptions().matrix_approximation_rank(1).start_powerSGD_iter(2).random_seed(7)));
  return out;
}

TEST(NonFiniteStep, LeavesTheHooksStateAsIfItNeverRan) {
  const std::vector<std::shared_ptr<CommunicationHook>> seen = hooks(), unseen = hooks();
  for (size_t h = 0; h < seen.size(); ++h) {
    const std::string name = seen[h]->name();
    SCOPED_TRACE(name);
    std::vector<int> all, finite_steps;
    for (int step = 0; step < kSteps; ++step) {
      all.push_back(step);
      if (step != 1 && step != 3) finite_steps.push_back(step);
    }
    const std::vector<Tensor> a = run(*seen[h], all);
    const std::vector<Tensor> b = run(*unseen[h], finite_steps);
    size_t j = 0;
    for (int step = 0; step < kSteps; ++step) {
      for (size_t index = 0; index < kBuckets; ++index) {
        const Tensor& result = a[step * kBuckets + index];
        if (step == 1 || step == 3) {
          // Every rank's result is not finite, the overflowing rank's and the others'.
          EXPECT_FALSE(finite(result)) << "step " << step << " bucket " << index;
          continue;
        }
        EXPECT_TRUE(finite(result)) << "step " << step << " bucket " << index;
        EXPECT_TRUE(identical(result, b[j])) << "step " << step << " bucket " << index;
        ++j;
      }
    }
    expect_same_state(seen[h]->state_dict(), unseen[h]->state_dict(), name);
  }
}

// One bucket of a step overflows, the other does not: the state of the one is kept as it was,
// the other's moves on (the hooks decide per bucket), and nothing non-finite stays behind.
TEST(NonFiniteStep, ABucketThatOverflowsAloneLeavesNothingNonFinite) {
  for (const std::shared_ptr<CommunicationHook>& hook : hooks()) {
    SCOPED_TRACE(hook->name());
    for (int step = 0; step < kSteps; ++step) {
      for (size_t index = 0; index < kBuckets; ++index) {
        GradBucket b = bucket(step, index, overflows(step) && index == 1);
        hook->reduce(*world(), b)->wait();
        const bool expect_finite = !((step == 1 || step == 3) && index == 1);
        EXPECT_EQ(finite(b.buffer), expect_finite) << "step " << step << " bucket " << index;
      }
    }
    for (const auto& [key, t] : hook->state_dict()) {
      if (t.dtype() == kF32) EXPECT_TRUE(finite(t)) << key;
    }
  }
}

// PowerSGD's iteration counter counts the steps that were taken: 7 steps, 2 of them skipped.
TEST(NonFiniteStep, PowerSGDCountsOnlyFiniteIterations) {
  PowerSGDHook hook(PowerSGDOptions().matrix_approximation_rank(1).start_powerSGD_iter(2));
  std::vector<int> all;
  for (int step = 0; step < kSteps; ++step) all.push_back(step);
  run(hook, all);
  EXPECT_EQ(hook.iter(), kSteps - 2);
  EXPECT_EQ(hook.state_dict().at("iter").item(), kSteps - 2);
}

}  // namespace
}  // namespace compression
}  // namespace dist
}  // namespace tessera
