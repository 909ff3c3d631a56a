// DDP on N ranks against one process on the concatenated N-times batch (f64, 1e-6 after 5
// steps), BatchNorm with per-rank statistics, no_sync, buckets (identical on every rank, and
// launched before backward ends), unused parameters, bucket views, the fp16 hook, the byte
// ledger, and mismatched models.
#include "dist/ddp/ddp.h"

#include <gtest/gtest.h>

#include "autograd/functions.h"
#include "dist/environment.h"
#include "models/resnet.h"
#include "models/simple.h"
#include "nn/nn.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {
namespace {

constexpr int64_t kPerRank = 6;

struct GlobalBatch {
  Tensor x, y;
};

// The same global batch on every rank, different for every step.
GlobalBatch batch(int step, int world, const Shape& image = {1, 28, 28}) {
  Generator g(1000 + step);
  Shape shape = {kPerRank * world};
  shape.insert(shape.end(), image.begin(), image.end());
  const Tensor x = randn(shape, kF64, &g);
  const Tensor y = arange(kPerRank * world, kI64);
  return {x, sub(y, mul(div(y, 10.0).to(kI64), 10.0)).to(kI64)};
}

Tensor slice(const Tensor& t, int rank) { return t.narrow(0, rank * kPerRank, kPerRank); }

std::shared_ptr<nn::Sequential> mlp() {
  manual_seed(7);
  auto m = models::MLP(784, 32, 10);
  m->to(kF64);
  return m;
}

using MakeOpt = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Variable>)>;

void expect_same_parameters(nn::Module& a, nn::Module& b, double tol) {
  const auto pa = a.parameters(), pb = b.parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_LT(max_abs_diff(pa[i].data(), pb[i].data()), tol) << i;
}

void ddp_matches_single_process(const MakeOpt& make_opt, const DDPOptions& options = DDPOptions()) {
  auto world = dist::world();
  const int N = world->size(), r = world->rank();
  auto reference = mlp();
  auto ref_opt = make_opt(reference->parameters());
  auto local = mlp();
  DistributedDataParallel ddp(local, world, options);
  auto opt = make_opt(local->parameters());
  for (int step = 0; step < 5; ++step) {
    const GlobalBatch b = batch(step, N);
    ref_opt->zero_grad();
    cross_entropy(reference->forward(Variable(b.x)), b.y).backward();
    ref_opt->step();
    opt->zero_grad();
    cross_entropy(ddp.forward(Variable(slice(b.x, r))), slice(b.y, r)).backward();
    opt->step();
  }
  expect_same_parameters(*reference, *local, 1e-6);
}

TEST(DDP, EqualsOneProcessOnTheFullBatchWithSgdMomentum) {
  ddp_matches_single_process([](std::vector<Variable> p) {
    return std::make_unique<optim::SGD>(p, optim::SGDOptions(0.1).momentum(0.9));
  });
}

TEST(DDP, EqualsOneProcessOnTheFullBatchWithAdam) {
  ddp_matches_single_process([](std::vector<Variable> p) {
    return std::make_unique<optim::Adam>(p, optim::AdamOptions(1e-3));
  });
}

TEST(DDP, GradientAsBucketViewGivesTheSameResultWithoutCopies) {
  ddp_matches_single_process(
      [](std::vector<Variable> p) {
        return std::make_unique<optim::SGD>(p, optim::SGDOptions(0.1).momentum(0.9));
      },
      DDPOptions().gradient_as_bucket_view(true).bucket_cap_mb(0.05));
  auto local = mlp();
  DistributedDataParallel ddp(local, dist::world(), DDPOptions().gradient_as_bucket_view(true));
  const GlobalBatch b = batch(0, dist::world()->size());
  sum(ddp.forward(Variable(slice(b.x, dist::world()->rank())))).backward();
  const Bucket& bucket = ddp.buckets()[0];
  EXPECT_EQ(ddp.parameters_in_order()[bucket.params[0]].grad().storage(), bucket.buffer.storage());
}

TEST(DDP, BatchNormStatisticsArePerRankWithRankZerosBuffers) {
  auto world = dist::world();
  const int N = world->size(), r = world->rank();
  auto make = [] {
    manual_seed(3);
    auto m = models::ResNetCifar(8, 1, 10);
    m->to(kF64);
    return m;
  };
  auto reference = make();
  optim::SGD ref_opt(reference->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  auto local = make();
  DistributedDataParallel ddp(local, world);
  optim::SGD opt(local->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  for (int step = 0; step < 5; ++step) {
    const GlobalBatch b = batch(step, N, {1, 8, 8});
    // Reference: each rank's slice through the model on its own (its own batch statistics),
    // gradients averaged, and rank 0's running statistics kept.
    ref_opt.zero_grad();
    StateDict rank0_buffers;
    for (int k = 0; k < N; ++k) {
      StateDict before;
      for (const auto& [name, v] : reference->named_buffers()) before.set(name, v.data().clone());
      const Variable loss = cross_entropy(reference->forward(Variable(slice(b.x, k))), slice(b.y, k));
      (loss * (1.0 / N)).backward();
      if (k == 0) {
        for (const auto& [name, v] : reference->named_buffers()) rank0_buffers.set(name, v.data().clone());
      }
      // Restore the pre-forward buffers so the next slice sees what its rank would.
      for (const auto& [name, v] : reference->named_buffers()) Tensor(v.data()).copy_(before.at(name));
    }
    for (const auto& [name, v] : reference->named_buffers()) Tensor(v.data()).copy_(rank0_buffers.at(name));
    ref_opt.step();

    opt.zero_grad();
    cross_entropy(ddp.forward(Variable(slice(b.x, r))), slice(b.y, r)).backward();
    opt.step();
  }
  expect_same_parameters(*reference, *local, 1e-6);
  if (r == 0) {
    const auto ref_buffers = reference->named_buffers();
    const auto buffers = local->named_buffers();
    for (size_t i = 0; i < buffers.size(); ++i) {
      EXPECT_LT(max_abs_diff(ref_buffers[i].second.data(), buffers[i].second.data()), 1e-9)
          << buffers[i].first;
    }
  }
}

TEST(DDP, NoSyncAccumulationEqualsTheSingleProcessSum) {
  auto world = dist::world();
  const int N = world->size(), r = world->rank();
  auto reference = mlp();
  const GlobalBatch a = batch(1, N), b = batch(2, N);
  cross_entropy(reference->forward(Variable(a.x)), a.y).backward();
  cross_entropy(reference->forward(Variable(b.x)), b.y).backward();
  auto local = mlp();
  DistributedDataParallel ddp(local, world);
  world->ledger().reset();
  {
    auto guard = ddp.no_sync();
    cross_entropy(ddp.forward(Variable(slice(a.x, r))), slice(a.y, r)).backward();
  }
  EXPECT_EQ(world->ledger().entry(CollectiveKind::kAllReduce).calls, 0);  // nothing sent
  cross_entropy(ddp.forward(Variable(slice(b.x, r))), slice(b.y, r)).backward();
  const auto pr = reference->parameters(), pl = local->parameters();
  for (size_t i = 0; i < pr.size(); ++i) EXPECT_LT(max_abs_diff(pr[i].grad(), pl[i].grad()), 1e-9);
}

std::shared_ptr<nn::Sequential> three_layers() {
  manual_seed(5);
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(784, 64),
      std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(64, 64),
      std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(64, 10)});
}

TEST(DDP, BucketsAreInReverseOrderAndIdenticalOnEveryRank) {
  auto world = dist::world();
  auto model = models::MLP(784, 256, 10);  // fc1.weight, fc1.bias, fc2.weight, fc2.bias
  DistributedDataParallel ddp(model, world, DDPOptions().first_bucket_mb(0.01).bucket_cap_mb(0.5));
  // First bucket: fc2.bias (40 B) + fc2.weight (10240 B) + fc1.bias (1024 B) passes 0.01 MB.
  ASSERT_EQ(ddp.buckets().size(), 2u);
  EXPECT_EQ(ddp.buckets()[0].params, (std::vector<size_t>{3, 2, 1}));
  EXPECT_EQ(ddp.buckets()[1].params, (std::vector<size_t>{0}));
  // Every rank's assignment, gathered, equals rank 0's.
  std::vector<int64_t> mine;
  for (const Bucket& b : ddp.buckets()) {
    mine.push_back(-1);
    for (size_t p : b.params) mine.push_back(static_cast<int64_t>(p));
  }
  const int64_t n = static_cast<int64_t>(mine.size());
  Tensor all = empty({n * world->size()}, kI64);
  world->all_gather(from_vector<int64_t>(mine, {n}), all)->wait();
  for (int k = 1; k < world->size(); ++k) {
    EXPECT_EQ(all.narrow(0, k * n, n).to_vector<int64_t>(), mine) << "rank " << k;
  }
}

TEST(DDP, AllReducesStartBeforeBackwardEnds) {
  auto world = dist::world();
  auto model = three_layers();
  // A tiny first bucket holds only the last layer: its all-reduce can start while backward is
  // still working on the first layer.
  DistributedDataParallel ddp(model, world, DDPOptions().first_bucket_mb(0.001).bucket_cap_mb(0.01));
  ASSERT_GE(ddp.buckets().size(), 3u);
  const GlobalBatch b = batch(0, world->size());
  cross_entropy(ddp.forward(Variable(slice(b.x, world->rank()).to(kF32))),
                slice(b.y, world->rank()))
      .backward();
  const std::vector<DDPEvent>& trace = ddp.trace();
  size_t first_launch = trace.size(), last_ready = 0;
  for (size_t i = 0; i < trace.size(); ++i) {
    if (trace[i].kind == DDPEvent::kLaunch && first_launch == trace.size()) first_launch = i;
    if (trace[i].kind == DDPEvent::kGradReady) last_ready = i;
  }
  EXPECT_LT(first_launch, last_ready);  // communication started while gradients still came in
  // The first-layer weight (parameter 0) is the last gradient to arrive.
  EXPECT_EQ(trace[last_ready].index, 0u);
  // Buckets launch in order 0, 1, 2, ...
  size_t expect = 0;
  for (const DDPEvent& e : trace) {
    if (e.kind == DDPEvent::kLaunch) {
      EXPECT_EQ(e.index, expect++);
    }
  }
  EXPECT_EQ(expect, ddp.buckets().size());
}

class TwoHeads : public nn::Module {
 public:
  TwoHeads() {
    used = register_module("used", std::make_shared<nn::Linear>(4, 2));
    unused = register_module("unused", std::make_shared<nn::Linear>(4, 2));
  }
  std::string type_name() const override { return "TwoHeads"; }
  Variable forward(const Variable& x) override { return used->forward(x); }
  std::shared_ptr<nn::Linear> used, unused;
};

TEST(DDP, UnusedParameters) {
  auto world = dist::world();
  {
    auto model = std::make_shared<TwoHeads>();
    DistributedDataParallel ddp(model, world, DDPOptions().find_unused_parameters(true));
    sum(ddp.forward(Variable(ones({3, 4})))).backward();
    EXPECT_TRUE(model->used->weight().grad().defined());
    EXPECT_EQ(amax(abs(model->unused->weight().grad())).item(), 0.0);
    sum(ddp.forward(Variable(ones({3, 4})))).backward();  // the next iteration works too
  }
  auto model = std::make_shared<TwoHeads>();
  DistributedDataParallel ddp(model, world);
  sum(ddp.forward(Variable(ones({3, 4})))).backward();
  try {
    ddp.forward(Variable(ones({3, 4})));
    ADD_FAILURE() << "expected an error about the unused parameters";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unused.weight"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("find_unused_parameters"), std::string::npos);
  }
}

TEST(DDP, Fp16CompressionHookHalvesTheBytes) {
  auto world = dist::world();
  const int N = world->size(), r = world->rank();
  auto plain_model = models::MLP(784, 32, 10);
  auto hooked_model = models::MLP(784, 32, 10);
  hooked_model->load_state_dict(plain_model->state_dict());
  DistributedDataParallel plain(plain_model, world), hooked(hooked_model, world);
  hooked.register_comm_hook(fp16_compress_hook);
  const GlobalBatch b = batch(0, N);
  const Tensor x = slice(b.x, r).to(kF32), y = slice(b.y, r);
  world->ledger().reset();
  cross_entropy(plain.forward(Variable(x)), y).backward();
  const int64_t plain_bytes = world->ledger().entry(CollectiveKind::kAllReduce).bytes;
  world->ledger().reset();
  cross_entropy(hooked.forward(Variable(x)), y).backward();
  const int64_t hooked_bytes = world->ledger().entry(CollectiveKind::kAllReduce).bytes;
  if (N > 1) {
    EXPECT_EQ(hooked_bytes * 2, plain_bytes);
  }
  const auto pp = plain_model->parameters(), ph = hooked_model->parameters();
  for (size_t i = 0; i < pp.size(); ++i) {
    EXPECT_LT(max_abs_diff(pp[i].grad(), ph[i].grad()), 1e-3 * (1 + amax(abs(pp[i].grad())).item()));
  }
}

TEST(DDP, LedgerShowsOneRingAllReducePerBucket) {
  auto world = dist::world();
  const int N = world->size(), r = world->rank();
  auto model = models::MLP(784, 32, 10);
  DistributedDataParallel ddp(model, world, DDPOptions().first_bucket_mb(0.001));
  world->ledger().reset();
  const GlobalBatch b = batch(0, N);
  cross_entropy(ddp.forward(Variable(slice(b.x, r).to(kF32))), slice(b.y, r)).backward();
  int64_t expected = 0;
  for (const Bucket& bucket : ddp.buckets()) {
    // The ring sends every chunk but its own in reduce-scatter, every chunk but its
    // right-hand neighbour's in all-gather: 2 (N-1)/N of the bucket when N divides it.
    const std::vector<int64_t> c = balanced_counts(bucket.numel, N);
    expected += (2 * bucket.numel - c[r] - c[(r + 1) % N]) * 4;
  }
  EXPECT_EQ(world->ledger().entry(CollectiveKind::kAllReduce).bytes, N > 1 ? expected : 0);
  EXPECT_EQ(world->ledger().entry(CollectiveKind::kAllReduce).calls,
            static_cast<int64_t>(ddp.buckets().size()));
}

TEST(DDP, MismatchedModelsAreReportedOnEveryRank) {
  auto world = dist::world();
  if (world->size() < 2) GTEST_SKIP();
  const int64_t in = world->rank() == 1 ? 5 : 4;
  auto model = std::make_shared<nn::Linear>(in, 3);
  try {
    DistributedDataParallel ddp(model, world);
    ADD_FAILURE() << "expected a mismatch error";
  } catch (const Error& e) {
    if (world->rank() == 1) {
      EXPECT_NE(std::string(e.what()).find("rank 0 has 'weight f32[3, 4]', rank 1 has 'weight f32[3, 5]'"),
                std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace dist
}  // namespace tessera
