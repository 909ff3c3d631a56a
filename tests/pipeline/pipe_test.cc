// Pipeline training on K = world-size ranks equals one process doing gradient accumulation
// over the same micro-batches: same parameters after 3 SGD steps (f32, 1e-5), the same batch
// loss on every rank, batches not divisible by M and smaller than M included; for GPipe, 1F1B
// and interleaved 1F1B, an MLP and a small ResNet (BatchNorm statistics per micro-batch, so the
// running statistics match too). Pipeline x data parallelism: pipe_data_parallel_test.cc.
#include "pipeline/pipe.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <map>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "dist/environment.h"
#include "models/resnet.h"
#include "nn/nn.h"
#include "optim/sgd.h"
#include "pipeline/microbatch.h"
#include "tensor/ops.h"
#include "tests/util/expect_error.h"
#include "tests/pipeline/mlp.h"
#include "tests/pipeline/pipe_reference.h"

namespace tessera {
namespace pipeline {
namespace {

// Flatten, 7 x (Linear(64, 64), ReLU), Linear(64, 10): 16 layers, so every stage of K <= 4 has
// activations inside it (what checkpointing drops).
std::shared_ptr<nn::Sequential> long_mlp() { return mlp_of(13, {64, 64, 64, 64, 64, 64, 64, 64, 10}); }

// 8 blocks, each with a Linear, so 4 ranks x 2 chunks all hold parameters (a stage without
// any is an error): [Flatten, Linear(64, 32), ReLU], 6 x [Linear(32, 32), ReLU], [Linear(32, 10)].
std::shared_ptr<nn::Sequential> blocks_mlp() {
  manual_seed(17);
  auto m = std::make_shared<nn::Sequential>();
  for (int b = 0; b < 8; ++b) {
    auto block = std::make_shared<nn::Sequential>();
    if (b == 0) block->push_back(std::make_shared<nn::Flatten>());
    block->push_back(std::make_shared<nn::Linear>(b == 0 ? 64 : 32, b == 7 ? 10 : 32));
    if (b < 7) block->push_back(std::make_shared<nn::ReLU>());
    m->push_back(block);
  }
  return m;
}

std::shared_ptr<nn::Sequential> tiny_resnet() {
  manual_seed(5);
  return models::ResNetCifar(8, 1, 10);
}

TEST(Pipe, GatherModelGivesTheWholeTrainedModelOnEveryRank) {
  auto world = dist::world();
  auto reference = tiny_resnet();
  optim::SGD ref_opt(reference->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  auto model = tiny_resnet();
  Pipe pipe(model, world, loss_fn, PipeOptions().microbatches(2).schedule("1f1b"));
  optim::SGD opt(pipe.parameters(), optim::SGDOptions(0.05).momentum(0.9));
  for (int step = 0; step < 2; ++step) {
    const Batch b = make_batch(step, 4, {1, 8, 8});
    reference_step(*reference, ref_opt, b, 2);
    opt.zero_grad();
    pipe.train_step(b.x, b.y);
    opt.step();
  }
  pipe.gather_model();
  const StateDict mine = model->state_dict(), ref = reference->state_dict();
  ASSERT_EQ(mine.size(), ref.size());
  for (const auto& [key, tensor] : ref) {
    EXPECT_LT(max_abs_diff(mine.at(key).to(kF64), tensor.to(kF64)), 1e-5) << key << " on rank " << world->rank();
  }
}

// Batches of 12 (even micro-batches), 7 (3 of 2 rows and one of 1) and 3 (fewer rows than M).
const std::vector<int64_t> kUnevenBatches = {12, 7, 3};

TEST(Pipe, GPipeEqualsGradientAccumulation) {
  pipeline_matches_accumulation(deep_mlp, "gpipe", 4, kUnevenBatches, {1, 8, 8});
}

TEST(Pipe, OneFOneBEqualsGradientAccumulation) {
  pipeline_matches_accumulation(deep_mlp, "1f1b", 4, kUnevenBatches, {1, 8, 8});
}

TEST(Pipe, OneFOneBWithManyMicrobatchesEqualsGradientAccumulation) {
  pipeline_matches_accumulation(deep_mlp, "1f1b", 8, {32, 29, 16}, {1, 8, 8});
}

TEST(Pipe, InterleavedEqualsGradientAccumulation) {
  // M = 8 micro-batches on every step (a multiple of K = 2 or 4); 13 rows are uneven.
  pipeline_matches_accumulation(blocks_mlp, "interleaved", 8, {16, 13, 8}, {1, 8, 8}, 2);
}

TEST(Pipe, ActivationCheckpointingGivesTheSameGradients) {
  for (const char* schedule : {"gpipe", "1f1b"}) {
    for (const char* mode : {"always", "except_last"}) {
      SCOPED_TRACE(::testing::Message() << schedule << " " << mode);
      pipeline_matches_accumulation(deep_mlp, schedule, 4, kUnevenBatches, {1, 8, 8}, 1, mode);
    }
  }
  pipeline_matches_accumulation(blocks_mlp, "interleaved", 8, {16, 13, 8}, {1, 8, 8}, 2, "always");
}

TEST(Pipe, OneFOneBAndCheckpointingHoldLessActivationMemoryThanGPipe) {
  auto world = dist::world();
  const int K = world->size(), M = 8;
  auto stats = [&](const std::string& schedule, const std::string& mode) {
    Pipe pipe(long_mlp(), world, loss_fn,
              PipeOptions().microbatches(M).schedule(schedule).checkpoint(mode));
    const Batch b = make_batch(0, 256, {1, 8, 8});
    pipe.train_step(b.x, b.y);  // the first step allocates the parameters' grads
    pipe.train_step(b.x, b.y);
    return pipe.stats();
  };
  const StageStats gpipe = stats("gpipe", "never"), one_f_one_b = stats("1f1b", "never");
  const StageStats gpipe_checkpointed = stats("gpipe", "always");
  const StageStats one_f_one_b_checkpointed = stats("1f1b", "always");
  if (world->rank() == 0) {
    std::printf("stage 0, K=%d M=%d, peak activation bytes / held between actions: gpipe %lld / %lld, "
                "1f1b %lld / %lld, gpipe+checkpoint %lld / %lld, 1f1b+checkpoint %lld / %lld\n", K, M,
                static_cast<long long>(gpipe.peak_activation_bytes), static_cast<long long>(gpipe.peak_held_bytes),
                static_cast<long long>(one_f_one_b.peak_activation_bytes),
                static_cast<long long>(one_f_one_b.peak_held_bytes),
                static_cast<long long>(gpipe_checkpointed.peak_activation_bytes),
                static_cast<long long>(gpipe_checkpointed.peak_held_bytes),
                static_cast<long long>(one_f_one_b_checkpointed.peak_activation_bytes),
                static_cast<long long>(one_f_one_b_checkpointed.peak_held_bytes));
    EXPECT_LT(one_f_one_b.peak_activation_bytes, gpipe.peak_activation_bytes);
    EXPECT_LT(gpipe_checkpointed.peak_activation_bytes, gpipe.peak_activation_bytes);
    // Between actions (the grads exist after the first step) stage 0 holds the activations of
    // the micro-batches it has forwarded and not yet backwarded: M of them under GPipe, K under
    // 1F1B, so 1F1B's are exactly K/M of GPipe's. With checkpointing each of those keeps only
    // its input, 32 x 1 x 8 x 8 floats. A received gradient lands in the stage's message
    // buffers (pipeline/p2p.h), allocated by the first step and reused: nothing new.
    const int64_t input = 32 * 64 * 4;
    EXPECT_EQ(one_f_one_b.peak_held_bytes * M, gpipe.peak_held_bytes * K);
    EXPECT_EQ(one_f_one_b_checkpointed.peak_held_bytes, K * input);
  }
}

TEST(Pipe, ForwardOnlyEvaluationGivesTheModelsOutputOnEveryRank) {
  auto world = dist::world();
  auto reference = blocks_mlp();
  for (const char* schedule : {"gpipe", "interleaved"}) {
    SCOPED_TRACE(schedule);
    Pipe pipe(blocks_mlp(), world, loss_fn,
              PipeOptions().microbatches(4).schedule(schedule).chunks_per_rank(
                  std::string(schedule) == "interleaved" ? 2 : 1));
    const Batch b = make_batch(0, 12, {1, 8, 8});
    const Tensor out = pipe.forward(b.x);
    EXPECT_EQ(out.shape(), (Shape{12, 10}));
    EXPECT_LT(max_abs_diff(out, reference->forward(Variable(b.x)).data()), 1e-6);
  }
}

TEST(Pipe, TinyResNetWithBatchNormEqualsGradientAccumulation) {
  for (const char* schedule : {"gpipe", "1f1b"}) {
    SCOPED_TRACE(schedule);
    pipeline_matches_accumulation(tiny_resnet, schedule, 4, {12, 10, 4}, {1, 8, 8});
  }
  // Recomputation must not update BatchNorm's running statistics a second time.
  pipeline_matches_accumulation(tiny_resnet, "1f1b", 4, {12, 10, 4}, {1, 8, 8}, 1, "always");
}

// Deferred BatchNorm: the pipeline updates the running statistics once per batch from all its
// micro-batches, for GPipe and 1F1B, and with recomputation (which must not count a micro-batch
// twice). Normalization uses each micro-batch's own statistics, so a deeper BatchNorm sees
// micro-batch-normalized inputs: the reference is the same micro-batches run one after another
// through the unpipelined model with deferred statistics, committed once per batch. (That one
// BatchNorm's deferred statistics equal an ordinary forward over the whole batch is
// tests/nn/layers_test's.) The count of batches tracked goes up once per batch.
TEST(Pipe, DeferredBatchNormCommitsOncePerBatch) {
  auto world = dist::world();
  for (const char* checkpoint : {"never", "always"}) {
    for (const char* schedule : {"gpipe", "1f1b"}) {
      SCOPED_TRACE(std::string(schedule) + " " + checkpoint);
      auto reference = tiny_resnet();
      std::vector<nn::BatchNorm2d*> ref_bns;
      for (const auto& [name, module] : reference->named_modules()) {
        if (auto* bn = dynamic_cast<nn::BatchNorm2d*>(module)) {
          bn->defer_running_statistics(true);
          ref_bns.push_back(bn);
        }
      }
      auto model = tiny_resnet();
      Pipe pipe(model, world, loss_fn,
                PipeOptions().microbatches(4).schedule(schedule).checkpoint(checkpoint)
                    .deferred_batch_norm(true));
      for (int step = 0; step < 2; ++step) {
        const Batch b = make_batch(step, 12, {1, 8, 8});
        for (const Microbatch& mb : split_microbatches(b.x, b.y, 4)) {
          NoGradGuard no_grad;
          reference->forward(Variable(mb.input));
        }
        for (nn::BatchNorm2d* bn : ref_bns) bn->commit_running_statistics();
        pipe.train_step(b.x, b.y);  // no optimizer step: the parameters stay equal
      }
      std::map<std::string, Tensor> ref;
      for (const auto& [name, buffer] : reference->named_buffers()) ref[name] = buffer.data();
      int compared = 0;
      for (const auto& chunk : pipe.chunks()) {
        for (const auto& [name, buffer] : chunk->named_buffers()) {
          ASSERT_TRUE(ref.count(name)) << name;
          if (name.find("num_batches_tracked") != std::string::npos) {
            EXPECT_EQ(buffer.data().item(), 2) << name;
          }
          EXPECT_LT(max_abs_diff(buffer.data().to(kF64), ref[name].to(kF64)), 1e-6) << name;
          ++compared;
        }
      }
      Tensor total = scalar_tensor(compared, kI64).reshape({1});
      world->all_reduce(total)->wait();
      EXPECT_EQ(total.item(), static_cast<double>(ref.size()));
    }
  }
}

TEST(Pipe, BalanceByParametersAndExplicitBalanceAreUsed) {
  auto world = dist::world();
  const int K = world->size();
  Pipe by_params(deep_mlp(), world, loss_fn, PipeOptions().balance("params"));
  int total = 0;
  for (int n : by_params.balance()) total += n;
  EXPECT_EQ(total, 8);
  EXPECT_EQ(static_cast<int>(by_params.balance().size()), K);
  const std::string spec = K == 2 ? "3,5" : "2,3,2,1";
  const std::vector<int> expected = K == 2 ? std::vector<int>{3, 5} : std::vector<int>{2, 3, 2, 1};
  Pipe explicit_balance(deep_mlp(), world, loss_fn, PipeOptions().balance(spec));
  EXPECT_EQ(explicit_balance.balance(), expected);
  EXPECT_EQ(static_cast<int>(explicit_balance.chunks()[0]->size()), expected[explicit_balance.stage()]);
  EXPECT_THROW(Pipe(deep_mlp(), world, loss_fn, PipeOptions().balance("4,4,4,4,4")), Error);
  EXPECT_THROW(Pipe(deep_mlp(), world, loss_fn, PipeOptions().schedule("1f1b").chunks_per_rank(2)),
               Error);
}

using testing::expect_error;

TEST(Pipe, BadInputIsTheSameErrorOnEveryRankWithoutMessages) {
  auto world = dist::world();
  const int K = world->size();
  auto one_layer = [] {
    auto m = std::make_shared<nn::Sequential>();
    m->push_back(std::make_shared<nn::Linear>(4, 2));
    return m;
  };
  expect_error([&] { Pipe(one_layer(), world, loss_fn); },
               std::to_string(K) + " pipeline parts (" + std::to_string(K) +
                   " stages x 1 chunks) but the model has only 1 layers");
  expect_error([&] { Pipe(deep_mlp(), world, loss_fn, PipeOptions().microbatches(0)); },
               "microbatches must be at least 1, got 0");
  expect_error([&] { Pipe(deep_mlp(), world, loss_fn, PipeOptions().schedule("zero-bubble")); },
               "'zero-bubble' is not one of gpipe, 1f1b, interleaved");
  expect_error([&] { Pipe(deep_mlp(), world, loss_fn, PipeOptions().checkpoint("sometimes")); },
               "'sometimes' is not one of always, except_last, never");
  expect_error([&] { Pipe(deep_mlp(), world, loss_fn, PipeOptions().balance("params,")); },
               "'params,' is not a list of layer counts");
  expect_error([&] { Pipe(deep_mlp(), world, loss_fn, PipeOptions().balance(K == 2 ? "1,7" : "1,3,2,2")); },
               "Pipe: stage 0 would hold no parameters (layers 0 (Flatten)) with balance");
  Pipe interleaved(blocks_mlp(), world, loss_fn,
                   PipeOptions().microbatches(8).schedule("interleaved").chunks_per_rank(2));
  const Batch b = make_batch(0, K + 1, {1, 8, 8});  // K + 1 rows: K + 1 micro-batches
  expect_error([&] { interleaved.train_step(b.x, b.y); }, "needs a multiple of the stage count");
  // Nothing was sent: the next step runs normally.
  const Batch ok = make_batch(1, 16, {1, 8, 8});
  EXPECT_GT(interleaved.train_step(ok.x, ok.y), 0);
}

TEST(Pipe, BalanceByTimeIsTheSameOnEveryRank) {
  auto world = dist::world();
  Pipe pipe(deep_mlp(), world, loss_fn,
            PipeOptions().balance("time").sample(make_batch(0, 4, {1, 8, 8}).x));
  Tensor mine = zeros({static_cast<int64_t>(pipe.balance().size())}, kI64);
  for (size_t i = 0; i < pipe.balance().size(); ++i) mine.data<int64_t>()[i] = pipe.balance()[i];
  Tensor rank0 = mine.clone();
  world->broadcast(rank0, 0)->wait();
  EXPECT_EQ(max_abs_diff(mine, rank0), 0);
}

TEST(Pipe, ReportsMeasuredIdleBesideTheBubbleFormula) {
  auto world = dist::world();
  for (const char* schedule : {"gpipe", "1f1b"}) {
    Pipe pipe(deep_mlp(), world, loss_fn, PipeOptions().microbatches(8).schedule(schedule));
    const Batch b = make_batch(0, 64, {1, 8, 8});
    pipe.train_step(b.x, b.y);
    EXPECT_EQ(pipe.last_microbatches(), 8);
    EXPECT_GT(pipe.stats().busy_seconds, 0);
    EXPECT_LE(pipe.stats().busy_seconds, pipe.stats().step_seconds);
    // Activations held at once: GPipe all M, 1F1B at most K - s.
    const int K = world->size(), s = pipe.stage();
    EXPECT_EQ(pipe.stats().peak_in_flight, std::string(schedule) == "gpipe" ? 8 : std::min(K - s, 8));
    std::printf("%s\n", pipe.bubble_report().c_str());
  }
}

TEST(Pipe, ChromeTraceHasEveryActionOfEveryStage) {
  auto world = dist::world();
  const int K = world->size(), M = 4;
  Pipe pipe(deep_mlp(), world, loss_fn, PipeOptions().microbatches(M).schedule("1f1b"));
  const Batch b = make_batch(0, 8, {1, 8, 8});
  pipe.train_step(b.x, b.y);
  EXPECT_EQ(pipe.trace().size(), one_f_one_b(K, M, pipe.stage()).size());
  const std::string json = pipe.chrome_trace();
  size_t expected = 0, found = 0;
  for (const auto& list : make_schedules(ScheduleKind::kOneFOneB, K, M)) expected += list.size();
  for (size_t at = json.find("\"ph\":\"X\""); at != std::string::npos; at = json.find("\"ph\":\"X\"", at + 1)) ++found;
  EXPECT_EQ(found, expected);
  EXPECT_NE(json.find("\"name\":\"stage " + std::to_string(K - 1) + "\""), std::string::npos);
  EXPECT_NE(json.find("\"name\":\"B3\",\"cat\":\"backward\""), std::string::npos);
}

}  // namespace
}  // namespace pipeline
}  // namespace tessera
