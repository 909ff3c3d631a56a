// Pipeline x half-precision parameters (train --param-dtype=f16|bf16): the model converted with
// Module::to(kF16 / kBF16), which leaves BatchNorm in f32, so a stage holds gradients of two
// dtypes. With D = 2 data-parallel replicas (K = 1 on 2 ranks, K = 2 on 4) Pipe averages each
// dtype's gradients in a flat buffer of that dtype; the result equals one process accumulating
// the same micro-batches, the replicas averaged. Tolerances: after 3 SGD steps the parameters
// (rounded from the optimizer's f32 masters) may differ by a unit in the last place of the half
// dtype, the replicas' gradients being summed in another order and rounded once more:
// measured at most 6.1e-5 for f16 and 4.9e-4 for bf16 (K = 1 and 2); the test allows 2.5e-4
// and 2e-3. BatchNorm's running statistics are each replica's own, as under DDP without
// SyncBatchNorm, so they are not compared. Balance "time" given an f32 sample (as the train
// tool builds it) profiles a half-precision model in its own dtype.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>

#include "dist/environment.h"
#include "dist/topology.h"
#include "nn/nn.h"
#include "optim/sgd.h"
#include "pipeline/microbatch.h"
#include "pipeline/pipe.h"
#include "tests/pipeline/pipe_reference.h"

namespace tessera {
namespace pipeline {
namespace {

// Conv, BatchNorm, ReLU | Flatten, Linear: a cut after layer 3 puts the f32 BatchNorm beside
// the half convolution on stage 0 (K = 2), or everything on one stage (K = 1). `first`, if
// given, goes before the convolution.
std::shared_ptr<nn::Sequential> conv_bn_net(DType dtype, std::shared_ptr<nn::Module> first = nullptr) {
  manual_seed(31);
  auto m = std::make_shared<nn::Sequential>();
  if (first) m->push_back(first);
  m->push_back(std::make_shared<nn::Conv2d>(nn::Conv2dOptions(1, 4, 3).padding(1)));
  m->push_back(std::make_shared<nn::BatchNorm2d>(4));
  m->push_back(std::make_shared<nn::ReLU>());
  m->push_back(std::make_shared<nn::Flatten>());
  m->push_back(std::make_shared<nn::Linear>(4 * 8 * 8, 10));
  m->to(dtype);  // as train's place_model does: BatchNorm stays f32
  return m;
}

void half_pipeline_times_data_parallel_matches_one_process(DType dtype, double tol) {
  auto world = dist::world();
  const int K = world->size() == 4 ? 2 : 1, M = 2;
  dist::Topology topo(world, K);
  const int D = topo.data_parallel_size();
  ASSERT_EQ(D, 2);
  auto reference = conv_bn_net(dtype);
  optim::SGD ref_opt(reference->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  Pipe pipe(conv_bn_net(dtype), topo.pipeline_group(), loss_fn,
            PipeOptions().microbatches(M).schedule("1f1b").balance(K == 2 ? "3,2" : "5")
                .data_parallel_group(topo.data_parallel_group()));
  // Stage 0 holds both dtypes: the half convolution and the f32 BatchNorm.
  if (pipe.stage() == 0) {
    bool half = false, f32 = false;
    for (const Variable& p : pipe.parameters()) (p.dtype() == kF32 ? f32 : half) = true;
    ASSERT_TRUE(half && f32);
  }
  optim::SGD opt(pipe.parameters(), optim::SGDOptions(0.05).momentum(0.9));
  for (int step = 0; step < 3; ++step) {
    const Batch global = make_batch(step, 8 * D, {1, 8, 8});
    const Tensor x = global.x.to(dtype);
    ref_opt.zero_grad();
    for (int d = 0; d < D; ++d) {
      for (const Microbatch& mb : split_microbatches(x.narrow(0, 8 * d, 8), global.y.narrow(0, 8 * d, 8), M)) {
        (loss_fn(reference->forward(Variable(mb.input)), mb.target) * (mb.weight / D)).backward();
      }
    }
    ref_opt.step();
    opt.zero_grad();
    const int d = topo.replica();
    pipe.train_step(x.narrow(0, 8 * d, 8), global.y.narrow(0, 8 * d, 8));
    // The averaged gradients keep their parameters' dtypes.
    for (const Variable& p : pipe.parameters()) EXPECT_EQ(p.grad().dtype(), p.dtype());
    opt.step();
  }
  // Parameters only: the reference's BatchNorm statistics saw both replicas' micro-batches.
  std::map<std::string, Variable> ref;
  for (const auto& [name, p] : reference->named_parameters()) ref[name] = p;
  int compared = 0;
  double worst = 0;
  for (const auto& chunk : pipe.chunks()) {
    for (const auto& [name, p] : chunk->named_parameters()) {
      ASSERT_TRUE(ref.count(name)) << name;
      ASSERT_EQ(p.dtype(), ref[name].dtype()) << name;
      const double diff = max_abs_diff(p.data(), ref[name].data());
      EXPECT_LT(diff, tol) << "stage " << pipe.stage() << " " << name;
      worst = std::max(worst, diff);
      ++compared;
    }
  }
  std::printf("%s parameters, K=%d x D=%d, rank %d: largest difference from one process %.2e\n",
              dtype_name(dtype), K, D, world->rank(), worst);
  Tensor total = scalar_tensor(compared, kI64).reshape({1});
  topo.pipeline_group()->all_reduce(total)->wait();
  EXPECT_EQ(total.item(), static_cast<double>(ref.size())) << "the stages do not cover the model";
}

TEST(PipeHalfPrecision, F16ParametersWithF32BatchNormTimesDataParallelEqualOneProcess) {
  half_pipeline_times_data_parallel_matches_one_process(kF16, 2.5e-4);
}

TEST(PipeHalfPrecision, BF16ParametersWithF32BatchNormTimesDataParallelEqualOneProcess) {
  half_pipeline_times_data_parallel_matches_one_process(kBF16, 2e-3);
}

// Records the dtype of what it is given; no parameters, so the model's input dtype is the
// next layer's.
struct DtypeProbe : nn::Module {
  Variable forward(const Variable& x) override {
    seen.push_back(x.dtype());
    return x;
  }
  std::string type_name() const override { return "DtypeProbe"; }
  std::vector<DType> seen;
};

TEST(PipeHalfPrecision, BalanceByTimeProfilesAHalfModelInItsDtypeGivenAnF32Sample) {
  auto world = dist::world();
  const int K = world->size() == 4 ? 2 : 1;
  dist::Topology topo(world, K);
  for (DType dtype : {kF16, kBF16}) {
    SCOPED_TRACE(dtype_name(dtype));
    auto probe = std::make_shared<DtypeProbe>();
    auto model = conv_bn_net(dtype, probe);
    // An f32 sample, as train builds it whatever --param-dtype is.
    const Tensor sample = make_batch(0, 4, {1, 8, 8}).x;
    ASSERT_EQ(sample.dtype(), kF32);
    Pipe pipe(model, topo.pipeline_group(), loss_fn,
              PipeOptions().microbatches(2).balance("time").sample(sample)
                  .data_parallel_group(topo.data_parallel_group()));
    ASSERT_FALSE(probe->seen.empty());
    for (DType seen : probe->seen) EXPECT_EQ(seen, dtype);
    int layers = 0;
    for (int n : pipe.balance()) layers += n;
    EXPECT_EQ(layers, 6);
    // And it trains in that dtype.
    const Batch b = make_batch(1, 8, {1, 8, 8});
    EXPECT_GT(pipe.train_step(b.x.to(dtype), b.y), 0);
  }
}

}  // namespace
}  // namespace pipeline
}  // namespace tessera
