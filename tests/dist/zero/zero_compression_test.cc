// ZeRO-1/2 with the gradients' reduce-scatter in half precision (ZeroOptions::reduce_dtype):
// against DDP with the same half-precision communication (dist::fp16_compress_hook for f16; an
// f32 DDP for the bound on bf16), and the reduce-scatter's bytes on the ledger exactly half of
// the f32 run's.
#include <gtest/gtest.h>

#include <cstdio>

#include "autograd/functions.h"
#include "dist/ddp/ddp.h"
#include "dist/environment.h"
#include "dist/zero/zero_optimizer.h"
#include "models/simple.h"
#include "optim/sgd.h"
#include "tensor/ops.h"
#include "tensor/random.h"
#include "tests/util/state_dicts.h"

namespace tessera {
namespace dist {
namespace {

constexpr int64_t kPerRank = 4;

std::shared_ptr<nn::Sequential> mlp() {
  manual_seed(19);
  return models::MLP(32, 24, 10);
}

std::pair<Tensor, Tensor> rank_batch(int step, int rank) {
  Generator g(70 * step + rank);
  const Tensor x = randn({kPerRank, 32}, kF32, &g);
  return {x, argmax(x.narrow(1, 0, 10), 1)};
}

struct ZeroRun {
  StateDict parameters;
  int64_t reduce_scatter_bytes = 0;  // of the last step
};

ZeroRun train_zero(int stage, DType reduce) {
  auto world = dist::world();
  auto model = mlp();
  ZeroRedundancyOptimizer opt(model->parameters(), world,
                              zero_factory<optim::SGD>(optim::SGDOptions(0.1).momentum(0.9)),
                              ZeroOptions().stage(stage).bucket_cap_mb(0.002).reduce_dtype(reduce));
  ZeroRun out;
  for (int step = 0; step < 4; ++step) {
    const auto [x, y] = rank_batch(step, world->rank());
    opt.zero_grad();
    world->ledger().reset();
    cross_entropy(model->forward(Variable(x)), y).backward();
    opt.step();
    out.reduce_scatter_bytes = world->ledger().entry(CollectiveKind::kReduceScatter).bytes;
  }
  for (const auto& [name, t] : model->state_dict()) out.parameters.set(name, t.clone());
  return out;
}

StateDict train_ddp(bool fp16_hook) {
  auto world = dist::world();
  auto model = mlp();
  DistributedDataParallel ddp(model, world);
  if (fp16_hook) ddp.register_comm_hook(fp16_compress_hook);
  optim::SGD opt(model->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  for (int step = 0; step < 4; ++step) {
    const auto [x, y] = rank_batch(step, world->rank());
    opt.zero_grad();
    cross_entropy(ddp.forward(Variable(x)), y).backward();
    opt.step();
  }
  StateDict out;
  for (const auto& [name, t] : model->state_dict()) out.set(name, t.clone());
  return out;
}

using testing::largest_difference;

TEST(ZeroCompression, HalfPrecisionReduceScatterEqualsDdpsFp16HookAndHalvesTheBytes) {
  auto world = dist::world();
  const StateDict ddp_f16 = train_ddp(true), ddp_f32 = train_ddp(false);
  for (int stage : {1, 2}) {
    const ZeroRun f32 = train_zero(stage, kF32);
    const ZeroRun f16 = train_zero(stage, kF16);
    const ZeroRun bf16 = train_zero(stage, kBF16);
    const double against_hook = largest_difference(f16.parameters, ddp_f16);
    const double bf16_error = largest_difference(bf16.parameters, ddp_f32);
    if (world->rank() == 0) {
      std::printf("ZeRO-%d, %d ranks: reduce-scatter bytes per step f32 %lld, f16 %lld, bf16 %lld; "
                  "f16 against DDP's fp16 hook %.3g; bf16 against f32 DDP %.3g\n",
                  stage, world->size(), static_cast<long long>(f32.reduce_scatter_bytes),
                  static_cast<long long>(f16.reduce_scatter_bytes),
                  static_cast<long long>(bf16.reduce_scatter_bytes), against_hook, bf16_error);
    }
    EXPECT_GT(f32.reduce_scatter_bytes, 0);
    EXPECT_EQ(2 * f16.reduce_scatter_bytes, f32.reduce_scatter_bytes) << "stage " << stage;
    EXPECT_EQ(2 * bf16.reduce_scatter_bytes, f32.reduce_scatter_bytes) << "stage " << stage;
    // The same pre-divided f16 sums, summed in another order (ring reduce-scatter chunks vs the
    // hook's all-reduce): within a few f16 roundings of the gradients, times lr and 4 steps.
    EXPECT_LT(against_hook, 2e-4) << "stage " << stage;
    EXPECT_LT(bf16_error, 5e-3) << "stage " << stage;
    EXPECT_LT(largest_difference(f32.parameters, ddp_f32), 1e-6) << "stage " << stage;
  }
}

TEST(ZeroCompression, OtherDtypesAreErrorsNamingThem) {
  auto world = dist::world();
  auto model = mlp();
  try {
    ZeroRedundancyOptimizer opt(model->parameters(), world,
                                zero_factory<optim::SGD>(optim::SGDOptions(0.1)),
                                ZeroOptions().reduce_dtype(kI64));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("reduce_dtype must be f32, f16 or bf16, got i64"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace dist
}  // namespace tessera
