// Compressed DDP on 2 and 3 ranks against a one-process simulation written here: every rank's
// gradient computed in one process, laid out in DDP's buckets, compressed by a compressor of its
// own per rank (its error-feedback residuals, its random draws: the same seeds), decompressed,
// summed in rank order and averaged; then the same SGD step. After 4 steps the parameters agree
// (to f32 rounding of the sums; fp16 sums in half precision on the wire). The byte ledger equals
// each compressor's formula; the hook's state round-trips mid-run and the run continues exactly.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "autograd/functions.h"
#include "dist/compression/compression_hook.h"
#include "dist/compression/error_feedback.h"
#include "dist/compression/make_hook.h"
#include "dist/ddp/ddp.h"
#include "dist/environment.h"
#include "models/simple.h"
#include "optim/sgd.h"
#include "tensor/ops.h"
#include "tensor/random.h"
#include "tests/util/state_dicts.h"

namespace tessera {
namespace dist {
namespace compression {
namespace {

constexpr int64_t kPerRank = 4, kIn = 12, kHidden = 16, kClasses = 5;
constexpr int kSteps = 4;

std::shared_ptr<nn::Sequential> mlp() {
  manual_seed(13);
  return models::MLP(kIn, kHidden, kClasses);
}

std::pair<Tensor, Tensor> rank_batch(int step, int rank) {
  Generator g(1000 * step + rank);
  const Tensor x = randn({kPerRank, kIn}, kF32, &g);
  return {x, argmax(x.narrow(1, 0, kClasses), 1)};
}

// Small buckets: the MLP's 293 parameters fall into two, so bucket indices matter.
DDPOptions small_buckets() { return DDPOptions().bucket_cap_mb(0.0004).first_bucket_mb(0.0002); }

std::unique_ptr<Compressor> compressor_for(const std::string& spec) {
  std::unique_ptr<Compressor> c = make_compressor(parse_compression(spec), /*seed=*/0);
  if (!c->unbiased()) c = std::make_unique<ErrorFeedback>(std::move(c));
  return c;
}

struct Result {
  StateDict parameters;
  int64_t bytes_per_step = 0;
};

Result run_ddp(const std::string& spec, bool reload_midway = false) {
  auto world = dist::world();
  auto model = mlp();
  DistributedDataParallel ddp(model, world, small_buckets());
  auto hook = make_compression_hook(parse_compression(spec), std::nullopt, 0);
  ddp.register_comm_hook(hook);
  optim::SGD opt(model->parameters(), optim::SGDOptions(0.1));
  Result out;
  for (int step = 0; step < kSteps; ++step) {
    if (reload_midway && step == 2) {
      // A checkpoint of the hook's state, loaded into a new hook.
      const StateDict saved = hook->state_dict();
      hook = make_compression_hook(parse_compression(spec), std::nullopt, 0);
      hook->load_state_dict(saved);
      ddp.register_comm_hook(hook);
    }
    const auto [x, y] = rank_batch(step, world->rank());
    opt.zero_grad();
    world->ledger().reset();
    cross_entropy(ddp.forward(Variable(x)), y).backward();
    out.bytes_per_step = world->ledger().total_bytes();
    opt.step();
  }
  for (const auto& [name, t] : model->state_dict()) out.parameters.set(name, t.clone());
  return out;
}

// The simulation: N ranks in one process, DDP's bucket layout, one compressor per rank.
StateDict simulate(const std::string& spec, int world, const std::vector<Bucket>& buckets) {
  auto model = mlp();
  const std::vector<Variable> params = model->parameters();
  std::vector<std::unique_ptr<Compressor>> per_rank;
  for (int r = 0; r < world; ++r) per_rank.push_back(compressor_for(spec));
  optim::SGD opt(params, optim::SGDOptions(0.1));
  for (int step = 0; step < kSteps; ++step) {
    // Every rank's gradient, flattened into each bucket's layout.
    std::vector<std::vector<Tensor>> flat(world);
    for (int r = 0; r < world; ++r) {
      const auto [x, y] = rank_batch(step, r);
      opt.zero_grad();
      cross_entropy(model->forward(Variable(x)), y).backward();
      for (const Bucket& b : buckets) {
        Tensor f = zeros({b.numel}, kF32);
        for (size_t j = 0; j < b.params.size(); ++j) {
          f.narrow(0, b.offsets[j], params[b.params[j]].numel())
              .copy_(params[b.params[j]].grad().reshape({-1}));
        }
        flat[r].push_back(f);
      }
    }
    opt.zero_grad();
    for (size_t bi = 0; bi < buckets.size(); ++bi) {
      const Bucket& b = buckets[bi];
      Tensor sum = zeros({b.numel}, kF32);
      std::vector<Tensor> messages;
      for (int r = 0; r < world; ++r) {
        messages.push_back(per_rank[r]->compress(flat[r][bi], {step, bi, r, world}));
      }
      if (per_rank[0]->transport() == Transport::kAllReduce) {
        Tensor message_sum = messages[0].to(kF32);
        for (int r = 1; r < world; ++r) message_sum = add(message_sum, messages[r].to(kF32));
        per_rank[0]->decompress_add(message_sum.to(messages[0].dtype()), sum, {step, bi, 0, world});
      } else {
        for (int r = 0; r < world; ++r) per_rank[r]->decompress_add(messages[r], sum, {step, bi, r, world});
      }
      for (size_t j = 0; j < b.params.size(); ++j) {
        const Variable& p = params[b.params[j]];
        p.set_grad(div(sum.narrow(0, b.offsets[j], p.numel()), static_cast<double>(world))
                       .reshape(p.shape()).clone());
      }
    }
    opt.step();
  }
  StateDict out;
  for (const auto& [name, t] : model->state_dict()) out.set(name, t.clone());
  return out;
}

using testing::largest_difference;

TEST(CompressedDdp, EqualsAOneProcessSimulationOfTheSameCompression) {
  auto world = dist::world();
  const int N = world->size();
  std::vector<Bucket> buckets;
  {
    auto model = mlp();
    DistributedDataParallel probe(model, world, small_buckets());
    buckets = probe.buckets();
    ASSERT_GE(buckets.size(), 2u);
  }
  for (const std::string spec : {"fp16", "bf16", "topk:0.1", "randomk:0.25", "qsgd:4", "sign"}) {
    const Result ddp = run_ddp(spec);
    const StateDict sim = simulate(spec, N, buckets);
    const double diff = largest_difference(ddp.parameters, sim);
    // The simulation adds f16/bf16 messages in f32 (the ring sums on the wire's dtype), and
    // the ring adds f32 random-k values in its own order.
    const double tolerance = spec == "fp16" ? 2e-4 : spec == "bf16" ? 2e-3 : 1e-6;
    if (world->rank() == 0) {
      std::printf("%-12s on %d ranks: %lld bytes per step, largest difference from the "
                  "simulation %.3g\n", spec.c_str(), N, static_cast<long long>(ddp.bytes_per_step), diff);
    }
    EXPECT_LT(diff, tolerance) << spec;
    // Bytes: each bucket's formula (the all-reduce ring splits a message into N chunks: within
    // one element per chunk of the formula), plus nothing else.
    auto c = make_compressor(parse_compression(spec), 0);
    double formula = 0;
    for (const Bucket& b : buckets) formula += bytes_sent(*c, b.numel, N);
    if (c->transport() == Transport::kAllGather) {
      EXPECT_EQ(ddp.bytes_per_step, static_cast<int64_t>(formula)) << spec;
    } else {
      EXPECT_NEAR(ddp.bytes_per_step, formula, 2.0 * N * 4 * buckets.size()) << spec;
    }
  }
}

TEST(CompressedDdp, HookStateRoundTripsMidRunAndTheRunContinuesExactly) {
  for (const std::string spec : {"topk:0.1", "randomk:0.25", "qsgd:4", "sign"}) {
    const Result straight = run_ddp(spec);
    const Result reloaded = run_ddp(spec, /*reload_midway=*/true);
    EXPECT_EQ(largest_difference(straight.parameters, reloaded.parameters), 0) << spec;
  }
}

}  // namespace
}  // namespace compression
}  // namespace dist
}  // namespace tessera
