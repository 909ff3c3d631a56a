// PowerSGD on 2 and 3 ranks: with rank >= min(rows, cols) it is the exact average, so DDP with
// the hook equals plain DDP; before start_powerSGD_iter it is plain DDP, bit for bit; at rank 1
// it equals a one-process simulation written here (every rank's gradient, the same initial Q,
// P and Q by hand, error feedback and warm start on and off); the byte ledger equals the
// header's formula; the hook's state resumes a run bit-identically; bad options name the value.
#include "dist/compression/powersgd.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "autograd/functions.h"
#include "dist/ddp/ddp.h"
#include "dist/environment.h"
#include "nn/nn.h"
#include "optim/sgd.h"
#include "tensor/ops.h"
#include "tensor/random.h"
#include "tests/util/expect_error.h"

namespace tessera {
namespace dist {
namespace compression {
namespace {

using testing::expect_error;

constexpr int64_t kPerRank = 8;

// Linear(in, hidden) -> Tanh -> Linear(hidden, out), f32 (Tanh: no dead units, so the weight
// gradients have full rank).
std::shared_ptr<nn::Sequential> mlp(int64_t in, int64_t hidden, int64_t out) {
  manual_seed(21);
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(in, hidden), std::make_shared<nn::Tanh>(),
      std::make_shared<nn::Linear>(hidden, out)});
}

// The 8-6-4 MLP's 82 parameters fall into two buckets: [b2, w2] and [b1, w1].
DDPOptions two_buckets() { return DDPOptions().first_bucket_mb(0.0001).bucket_cap_mb(0.0002); }

struct Training {
  std::shared_ptr<nn::Sequential> model;
  std::unique_ptr<DistributedDataParallel> ddp;
  std::unique_ptr<optim::SGD> opt;
  int64_t in = 0, out = 0;
};

Training make_training(std::shared_ptr<CommunicationHook> hook, const DDPOptions& options,
                       int64_t in = 8, int64_t hidden = 6, int64_t out = 4) {
  Training t;
  t.in = in;
  t.out = out;
  t.model = mlp(in, hidden, out);
  t.ddp = std::make_unique<DistributedDataParallel>(t.model, dist::world(), options);
  if (hook) t.ddp->register_comm_hook(std::move(hook));
  t.opt = std::make_unique<optim::SGD>(t.model->parameters(), optim::SGDOptions(0.1));
  return t;
}

// This rank's batch of `step`: different per rank and step.
void train_step(Training& t, int step) {
  Generator g(100 * step + world()->rank());
  const Tensor x = randn({kPerRank, t.in}, kF32, &g);
  const Tensor y = randn({kPerRank, t.out}, kF32, &g);
  t.opt->zero_grad();
  mse_loss(t.ddp->forward(Variable(x)), Variable(y)).backward();
  t.opt->step();
}

double max_parameter_diff(nn::Module& a, nn::Module& b) {
  const auto pa = a.parameters(), pb = b.parameters();
  double d = 0;
  for (size_t i = 0; i < pa.size(); ++i) d = std::max(d, max_abs_diff(pa[i].data(), pb[i].data()));
  return d;
}

TEST(PowerSGD, FullRankEqualsPlainDDP) {
  // rank 8 >= min(rows, cols) of both weights (6 x 8, 4 x 6); min_compression_rate 0 compresses
  // them anyway: P spans the averaged gradient's columns, so P P^T mean(M) = mean(M).
  Training plain = make_training(nullptr, two_buckets());
  auto hook = std::make_shared<PowerSGDHook>(
      PowerSGDOptions().matrix_approximation_rank(8).min_compression_rate(0).start_powerSGD_iter(2));
  Training compressed = make_training(hook, two_buckets());
  ASSERT_EQ(compressed.ddp->buckets().size(), 2u);
  for (int step = 0; step < 6; ++step) {
    train_step(plain, step);
    train_step(compressed, step);
  }
  EXPECT_LT(max_parameter_diff(*plain.model, *compressed.model), 1e-5);
  // Both weights went through PowerSGD (their warm-start Qs exist), at their full rank.
  const StateDict state = hook->state_dict();
  ASSERT_TRUE(state.contains("bucket.0.q.1") && state.contains("bucket.1.q.1"));
  EXPECT_EQ(state.at("bucket.0.q.1").shape(), (Shape{6, 4}));  // w2 [4 x 6]: Q is [6, 4]
  EXPECT_EQ(state.at("bucket.1.q.1").shape(), (Shape{8, 6}));  // w1 [6 x 8]: Q is [8, 6]
  EXPECT_EQ(hook->iter(), 6);
}

TEST(PowerSGD, BeforeStartIsPlainDDPBitForBit) {
  auto& ledger = world()->ledger();
  ledger.reset();
  Training plain = make_training(nullptr, two_buckets());
  for (int step = 0; step < 4; ++step) train_step(plain, step);
  const LedgerEntry plain_bytes = ledger.entry(CollectiveKind::kAllReduce);
  ledger.reset();
  auto hook = std::make_shared<PowerSGDHook>(PowerSGDOptions().start_powerSGD_iter(4));
  Training compressed = make_training(hook, two_buckets());
  for (int step = 0; step < 4; ++step) train_step(compressed, step);
  const LedgerEntry hook_bytes = ledger.entry(CollectiveKind::kAllReduce);
  EXPECT_EQ(max_parameter_diff(*plain.model, *compressed.model), 0.0);
  EXPECT_EQ(hook_bytes.calls, plain_bytes.calls);
  EXPECT_EQ(hook_bytes.bytes, plain_bytes.bytes);
  EXPECT_EQ(hook->iter(), 4);
  EXPECT_EQ(hook->state_dict().size(), 1u);  // "iter" only: nothing compressed yet
}

// ---- rank 1 against a one-process simulation ----

// A hand-made bucket: gradients of the given shapes as views of one flat f32 buffer.
GradBucket make_bucket(size_t index, const std::vector<Shape>& shapes) {
  GradBucket b;
  b.index = index;
  int64_t n = 0;
  for (const Shape& s : shapes) n += numel(s);
  b.buffer = zeros({n}, kF32);
  int64_t at = 0;
  for (size_t k = 0; k < shapes.size(); ++k) {
    b.gradients.push_back(b.buffer.narrow(0, at, numel(shapes[k])).view(shapes[k]));
    b.parameters.push_back(k);
    at += numel(shapes[k]);
  }
  return b;
}

// Rank `rank`'s gradient for bucket `b` at `step` (f32, flat), with a common low-rank part so
// the ranks' matrices are correlated as real gradients are.
Tensor rank_gradient(int step, int rank, size_t b, int64_t n) {
  Generator common(7000 + 10 * step + b), own(9000 + 100 * step + 10 * rank + b);
  return add(randn({n}, kF32, &common), mul(randn({n}, kF32, &own), 0.5));
}

// Gram-Schmidt as the paper writes it, in f64: normalize column i, remove it from the rest.
Tensor gram_schmidt(const Tensor& m) {
  Tensor out = m.to(kF64).clone();
  const int64_t rows = out.size(0), r = out.size(1);
  double* a = out.data<double>();
  for (int64_t i = 0; i < r; ++i) {
    double norm = 0;
    for (int64_t x = 0; x < rows; ++x) norm += a[x * r + i] * a[x * r + i];
    norm = std::sqrt(norm);
    for (int64_t x = 0; x < rows; ++x) a[x * r + i] /= norm;
    for (int64_t j = i + 1; j < r; ++j) {
      double dot = 0;
      for (int64_t x = 0; x < rows; ++x) dot += a[x * r + i] * a[x * r + j];
      for (int64_t x = 0; x < rows; ++x) a[x * r + j] -= dot * a[x * r + i];
    }
  }
  return out;
}

struct SimMatrix {
  size_t gradient;
  int64_t offset, rows, cols;
};

// One bucket of the simulation: which gradients are matrices (by hand), every rank's residual,
// the warm-start Qs.
struct SimBucket {
  std::vector<Shape> shapes;
  std::vector<SimMatrix> matrices;
  std::vector<Tensor> residual;  // per rank, f64
  std::vector<Tensor> q;         // per matrix, f64 [cols, 1]
};

// The sum over ranks the hook must leave in the bucket at `step` (f64), updating the state.
Tensor simulate(SimBucket& sim, size_t index, int step, int world_size,
                const PowerSGDOptions& options, int64_t n) {
  std::vector<Tensor> input;
  for (int r = 0; r < world_size; ++r) input.push_back(rank_gradient(step, r, index, n).to(kF64));
  Tensor sum_in = zeros({n}, kF64);
  for (int r = 0; r < world_size; ++r) sum_in = add(sum_in, input[r]);
  if (step < options.start_powerSGD_iter()) return sum_in;

  if (options.use_error_feedback()) {
    if (sim.residual.empty()) sim.residual.assign(world_size, zeros({n}, kF64));
    for (int r = 0; r < world_size; ++r) input[r] = add(input[r], sim.residual[r]);
  }
  if (!options.warm_start() || sim.q.empty()) {
    GradBucket shape_only = make_bucket(index, sim.shapes);
    const std::vector<Tensor> fresh =
        powersgd_initial_qs(options.random_seed(), step, index, plan_powersgd(shape_only, options));
    sim.q.clear();
    for (const Tensor& q : fresh) sim.q.push_back(q.to(kF64));
  }
  // Everything uncompressed first: the average over ranks.
  Tensor average = zeros({n}, kF64);
  for (int r = 0; r < world_size; ++r) average = add(average, input[r]);
  average = div(average, world_size);
  Tensor result = average.clone();  // PyTorch's result: averages, P Q^T for the matrices
  for (size_t i = 0; i < sim.matrices.size(); ++i) {
    const SimMatrix& m = sim.matrices[i];
    auto matrix = [&](int r) { return input[r].narrow(0, m.offset, m.rows * m.cols).view({m.rows, m.cols}); };
    const Tensor q = gram_schmidt(sim.q[i]);
    Tensor p = zeros({m.rows, 1}, kF64);
    for (int r = 0; r < world_size; ++r) p = add(p, matmul(matrix(r), q));  // all-reduce #2
    p = gram_schmidt(p);
    Tensor q_sum = zeros({m.cols, 1}, kF64);
    for (int r = 0; r < world_size; ++r) q_sum = add(q_sum, matmul(matrix(r).t(), p));  // #3
    sim.q[i] = div(q_sum, world_size);
    result.narrow(0, m.offset, m.rows * m.cols).copy_(matmul(p, sim.q[i].t()).reshape({m.rows * m.cols}));
  }
  if (options.use_error_feedback()) {
    for (int r = 0; r < world_size; ++r) sim.residual[r] = sub(input[r], result);
  }
  if (!options.warm_start()) sim.q.clear();
  // The hook leaves N times PyTorch's result (the sums for the uncompressed part).
  return mul(result, world_size);
}

void expect_simulation(bool error_feedback, bool warm_start) {
  auto world = dist::world();
  const int N = world->size(), rank = world->rank();
  const PowerSGDOptions options = PowerSGDOptions()
                                      .use_error_feedback(error_feedback)
                                      .warm_start(warm_start)
                                      .start_powerSGD_iter(error_feedback || warm_start ? 2 : 0)
                                      .random_seed(5);
  PowerSGDHook hook(options);
  // Bucket 0: a bias, a [6, 2, 2] weight (as 6 x 4: compressed, 10 * 2 < 24) and a [3, 2] one
  // (5 * 2 >= 6: too small to pay, uncompressed). Bucket 1: a [7, 5] weight and a bias.
  std::vector<SimBucket> sims(2);
  sims[0].shapes = {{5}, {6, 2, 2}, {3, 2}};
  sims[0].matrices = {{1, 5, 6, 4}};
  sims[1].shapes = {{7, 5}, {4}};
  sims[1].matrices = {{0, 0, 7, 5}};
  std::vector<GradBucket> buckets = {make_bucket(0, sims[0].shapes), make_bucket(1, sims[1].shapes)};

  // The plan as a literal table.
  const PowerSGDPlan plan0 = plan_powersgd(buckets[0], options);
  ASSERT_EQ(plan0.matrices.size(), 1u);
  EXPECT_EQ(plan0.matrices[0].gradient, 1u);
  EXPECT_EQ(plan0.matrices[0].rows, 6);
  EXPECT_EQ(plan0.matrices[0].cols, 4);
  EXPECT_EQ(plan0.uncompressed, (std::vector<size_t>{0, 2}));
  EXPECT_EQ(plan0.uncompressed_numel, 11);
  EXPECT_EQ(plan0.p_numel, 6);
  EXPECT_EQ(plan0.q_numel, 4);

  for (int step = 0; step < 5; ++step) {
    // As DDP: reduce every bucket in order, then wait them in order.
    std::vector<std::shared_ptr<Work>> works;
    for (size_t b = 0; b < buckets.size(); ++b) {
      buckets[b].buffer.copy_(rank_gradient(step, rank, b, buckets[b].buffer.numel()));
      works.push_back(hook.reduce(*world, buckets[b]));
    }
    for (size_t b = 0; b < buckets.size(); ++b) {
      works[b]->wait();
      const Tensor expected = simulate(sims[b], b, step, N, options, buckets[b].buffer.numel());
      EXPECT_LT(max_abs_diff(buckets[b].buffer.to(kF64), expected), 2e-5 * N)
          << "step " << step << " bucket " << b;
      if (step < options.start_powerSGD_iter()) {
        // Plain all-reduce: the sum, and nothing kept.
        EXPECT_LT(max_abs_diff(buckets[b].buffer.to(kF64), expected), 1e-5);
      }
    }
  }
  EXPECT_EQ(hook.iter(), 5);
  const StateDict state = hook.state_dict();
  EXPECT_EQ(state.contains("bucket.0.residual"), error_feedback);
  EXPECT_EQ(state.contains("bucket.0.q.1"), warm_start);
  EXPECT_EQ(state.contains("bucket.1.q.0"), warm_start);
  if (error_feedback) {
    // This rank's residual, against the simulation's.
    EXPECT_LT(max_abs_diff(state.at("bucket.1.residual").to(kF64), sims[1].residual[rank]), 1e-5);
  }
}

TEST(PowerSGD, RankOneMatchesSimulation) { expect_simulation(true, true); }
TEST(PowerSGD, RankOneMatchesSimulationWithoutErrorFeedback) { expect_simulation(false, true); }
TEST(PowerSGD, RankOneMatchesSimulationWithoutWarmStart) { expect_simulation(true, false); }
TEST(PowerSGD, RankOneMatchesSimulationWithNeither) { expect_simulation(false, false); }

// ---- bytes ----

// What a ring all-reduce of k f32 elements sends from this rank (dist/process_group_mpi.cc):
// every chunk but its own in the reduce-scatter, every chunk but its right neighbour's in the
// all-gather.
int64_t ring_bytes(int64_t k, int world_size, int rank) {
  if (k == 0 || world_size == 1) return 0;
  const std::vector<int64_t> c = balanced_counts(k, world_size);
  return 4 * (2 * k - c[rank] - c[(rank + 1) % world_size]);
}

TEST(PowerSGD, LedgerBytesEqualTheFormula) {
  // The header's example: Linear(16, 12) -> Tanh -> Linear(12, 4), one bucket
  // [b2 4 | w2 4x12 | b1 12 | w1 12x16], rank 1.
  auto world = dist::world();
  const int N = world->size(), rank = world->rank();
  auto hook = std::make_shared<PowerSGDHook>(PowerSGDOptions().start_powerSGD_iter(2));
  Training t = make_training(hook, DDPOptions(), 16, 12, 4);
  ASSERT_EQ(t.ddp->buckets().size(), 1u);
  GradBucket shapes = make_bucket(0, {{4}, {4, 12}, {12}, {12, 16}});
  const PowerSGDPlan plan = plan_powersgd(shapes, hook->options());
  EXPECT_EQ(plan.uncompressed_numel, 16);
  EXPECT_EQ(plan.p_numel, 16);  // 4 + 12
  EXPECT_EQ(plan.q_numel, 28);  // 12 + 16
  EXPECT_EQ(plan.wire_numel(), 60);

  auto& ledger = world->ledger();
  for (int step = 0; step < 4; ++step) {
    ledger.reset();
    train_step(t, step);
    const LedgerEntry e = ledger.entry(CollectiveKind::kAllReduce);
    if (step < 2) {
      EXPECT_EQ(e.calls, 1);
      EXPECT_EQ(e.bytes, ring_bytes(256, N, rank)) << "step " << step;
    } else {
      EXPECT_EQ(e.calls, 3);  // uncompressed, P, Q
      EXPECT_EQ(e.bytes, ring_bytes(16, N, rank) + ring_bytes(16, N, rank) + ring_bytes(28, N, rank))
          << "step " << step;
      if (N == 2) {
        EXPECT_EQ(e.bytes, 240);  // against 1024 uncompressed
      }
    }
  }
}

// ---- resume ----

TEST(PowerSGD, StateDictResumesBitIdentically) {
  const PowerSGDOptions options =
      PowerSGDOptions().matrix_approximation_rank(2).min_compression_rate(1).start_powerSGD_iter(2)
          .random_seed(3);
  auto hook = std::make_shared<PowerSGDHook>(options);
  Training full = make_training(hook, two_buckets());
  for (int step = 0; step < 6; ++step) train_step(full, step);

  auto first_hook = std::make_shared<PowerSGDHook>(options);
  Training first = make_training(first_hook, two_buckets());
  for (int step = 0; step < 3; ++step) train_step(first, step);
  const StateDict model_state = first.model->state_dict();
  const StateDict hook_state = first_hook->state_dict();
  EXPECT_EQ(hook_state.at("iter").item(), 3);
  // Bucket 0 is [b2, w2], bucket 1 [b1, w1]: the weights (position 1) carry Qs of rank 2.
  EXPECT_EQ(hook_state.at("bucket.0.residual").shape(), (Shape{28}));
  EXPECT_EQ(hook_state.at("bucket.0.q.1").shape(), (Shape{6, 2}));
  EXPECT_EQ(hook_state.at("bucket.1.residual").shape(), (Shape{54}));
  EXPECT_EQ(hook_state.at("bucket.1.q.1").shape(), (Shape{8, 2}));
  EXPECT_FALSE(hook_state.contains("bucket.0.q.0"));  // the bias is not compressed

  auto resumed_hook = std::make_shared<PowerSGDHook>(options);
  resumed_hook->load_state_dict(hook_state);
  EXPECT_EQ(resumed_hook->iter(), 3);
  Training resumed = make_training(resumed_hook, two_buckets());
  resumed.model->load_state_dict(model_state);
  for (int step = 3; step < 6; ++step) train_step(resumed, step);

  EXPECT_EQ(max_parameter_diff(*full.model, *resumed.model), 0.0);
  const StateDict a = hook->state_dict(), b = resumed_hook->state_dict();
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a) EXPECT_EQ(max_abs_diff(t, b.at(name)), 0.0) << name;
}

// ---- errors ----

TEST(PowerSGD, BadOptionsAreErrorsNamingTheValue) {
  expect_error([] { PowerSGDHook h(PowerSGDOptions().start_powerSGD_iter(1)); },
               "start_powerSGD_iter must be at least 2 when error feedback or warm start is on "
               "(PyTorch's rule), got 1");
  expect_error([] { PowerSGDHook h(PowerSGDOptions().warm_start(false).start_powerSGD_iter(0)); },
               "got 0 (use_error_feedback on, warm_start off)");
  // Without either, compressing from iteration 0 is fine.
  PowerSGDHook from_zero(
      PowerSGDOptions().use_error_feedback(false).warm_start(false).start_powerSGD_iter(0));
  expect_error([] { PowerSGDHook h(PowerSGDOptions().matrix_approximation_rank(0)); },
               "matrix_approximation_rank must be at least 1, got 0");
  expect_error([] { PowerSGDHook h(PowerSGDOptions().min_compression_rate(-1)); },
               "min_compression_rate must be finite and >= 0, got -1");
  expect_error([] { PowerSGDHook h(PowerSGDOptions().orthogonalization_epsilon(-0.5)); },
               "orthogonalization_epsilon must be finite and >= 0, got -0.5");
  expect_error([] { PowerSGDHook h(PowerSGDOptions().start_powerSGD_iter(-3).use_error_feedback(false).warm_start(false)); },
               "start_powerSGD_iter must be >= 0, got -3");

  // Not f32.
  GradBucket f64 = make_bucket(4, {{3, 3}});
  f64.buffer = zeros({9}, kF64);
  f64.gradients = {f64.buffer.view({3, 3})};
  expect_error([&] { PowerSGDHook().reduce(*world(), f64); }, "bucket 4 holds f64 gradients");

  // States that are not a PowerSGD hook's, or do not fit the bucket.
  StateDict no_iter;
  expect_error([&] { PowerSGDHook().load_state_dict(no_iter); }, "no 'iter' entry");
  StateDict stray;
  stray.set("iter", scalar_tensor(5, kI64));
  stray.set("bucket.0.momentum", zeros({3}, kF32));
  expect_error([&] { PowerSGDHook().load_state_dict(stray); }, "unexpected entry 'bucket.0.momentum'");
  StateDict wrong_q;
  wrong_q.set("iter", scalar_tensor(5, kI64));
  wrong_q.set("bucket.0.q.0", zeros({4, 1}, kF32));  // the [3, 3] matrix needs [3, 1]
  PowerSGDHook loaded(PowerSGDOptions().min_compression_rate(0).start_powerSGD_iter(2));
  loaded.load_state_dict(wrong_q);
  GradBucket small = make_bucket(0, {{3, 3}});
  expect_error([&] { loaded.reduce(*world(), small); },
               "the loaded warm-start Qs of bucket 0 do not fit it: it needs [bucket.0.q.0 [3, 1]]");
}

}  // namespace
}  // namespace compression
}  // namespace dist
}  // namespace tessera
