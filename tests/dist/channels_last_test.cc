// Channels-last activations under the data-parallel strategies, on 2 and 3 ranks. In f64:
// a model whose first batch norm (+ ReLU) and max pooling get NHWC input (the NHWC kernels run
// forward and backward; the convolution after them reads NCHW, there being no f64 channels-last
// convolution), trained 3 SGD steps with DDP and with FullyShardedDataParallel (ZeRO-3) from
// NHWC batches, each against the same strategy from NCHW batches: the same parameters and
// running statistics to 1e-10 (the batch norm sums are added in another order).
#include <gtest/gtest.h>

#include "autograd/functions.h"
#include "dist/ddp/ddp.h"
#include "dist/environment.h"
#include "dist/zero/fully_sharded.h"
#include "nn/batch_norm.h"
#include "nn/conv2d.h"
#include "nn/flatten.h"
#include "nn/linear.h"
#include "nn/pooling.h"
#include "nn/sequential.h"
#include "optim/sgd.h"
#include "tensor/ops.h"
#include "tensor/random.h"

namespace tessera {
namespace dist {
namespace {

std::shared_ptr<nn::Sequential> model() {
  manual_seed(31);
  auto m = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::BNReLU2d>(3), std::make_shared<nn::MaxPool2d>(nn::Pool2dOptions(2)),
      std::make_shared<nn::Conv2d>(nn::Conv2dOptions(3, 4, 3).padding(1)),
      std::make_shared<nn::BNReLU2d>(4), std::make_shared<nn::Flatten>(),
      std::make_shared<nn::Linear>(4 * 4 * 4, 10)});
  m->to(kF64);
  return m;
}

// This rank's [4, 3, 8, 8] batch, NHWC when asked.
std::pair<Tensor, Tensor> batch(int step, int rank, bool channels_last) {
  Generator g(900 + 10 * step + rank);
  Tensor x = randn({4, 3, 8, 8}, kF64, &g);
  if (channels_last) x = x.contiguous(MemoryFormat::kChannelsLast);
  return {x, from_vector<int64_t>({step, rank + 2, 7, 9 - step}, {4})};
}

std::unique_ptr<optim::SGD> sgd(std::vector<Variable> params) {
  return std::make_unique<optim::SGD>(params, optim::SGDOptions(0.1).momentum(0.9));
}

void expect_same_state(const StateDict& got, const StateDict& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (const auto& [name, t] : want) {
    ASSERT_TRUE(got.contains(name)) << what << " " << name;
    EXPECT_LT(max_abs_diff(got.at(name), t), 1e-10) << what << " " << name;
  }
}

// Each strategy run twice, from NCHW and from NHWC batches (the model with
// to(MemoryFormat::kChannelsLast) in the second); each pair must agree. (DDP and
// FullyShardedDataParallel differ from each other in their running statistics: DDP broadcasts
// rank 0's buffers, FSDP keeps each rank's.)
TEST(ChannelsLastDist, DdpAndFullyShardedFromNhwcBatchesEqualTheirNchwRuns) {
  auto world = dist::world();
  const int r = world->rank();
  std::shared_ptr<nn::Sequential> ddp_models[2], fsdp_models[2];
  std::unique_ptr<DistributedDataParallel> ddp[2];
  std::unique_ptr<FullyShardedDataParallel> fsdp[2];
  std::unique_ptr<optim::SGD> opts[4];
  bool bn_nhwc = false;
  for (int k = 0; k < 2; ++k) {
    ddp_models[k] = model();
    fsdp_models[k] = model();
    if (k == 1) {
      ddp_models[k]->to(MemoryFormat::kChannelsLast);
      fsdp_models[k]->to(MemoryFormat::kChannelsLast);
      ddp_models[k]->children().front()->register_forward_hook(
          [&bn_nhwc](nn::Module&, const Variable& y) {
            bn_nhwc = y.data().is_channels_last() && !y.data().is_contiguous();
            return y;
          });
    }
    ddp[k] = std::make_unique<DistributedDataParallel>(ddp_models[k], world);
    opts[k] = sgd(ddp_models[k]->parameters());
    fsdp[k] = std::make_unique<FullyShardedDataParallel>(fsdp_models[k], world,
                                                         FullyShardedOptions().min_num_params(50));
    opts[2 + k] = sgd(fsdp[k]->shard_parameters());
  }
  for (int step = 0; step < 3; ++step) {
    for (auto& opt : opts) opt->zero_grad();
    for (int k = 0; k < 2; ++k) {
      const auto [x, y] = batch(step, r, k == 1);
      cross_entropy(ddp[k]->forward(Variable(x)), y).backward();
      cross_entropy(fsdp[k]->forward(Variable(x)), y).backward();
    }
    EXPECT_TRUE(bn_nhwc) << "step " << step;
    for (auto& opt : opts) opt->step();
  }
  expect_same_state(ddp_models[1]->state_dict(), ddp_models[0]->state_dict(), "DDP");
  expect_same_state(fsdp[1]->state_dict(), fsdp[0]->state_dict(), "FSDP");
}

// f32, where the CPU's channels-last convolutions run oneDNN's NHWC primitives (tessera's own
// kernels run the NCHW ones): FullyShardedDataParallel, each Conv2d and Linear a unit gathered
// for its forward and backward, against DDP, both channels-last from NHWC batches, 3 SGD steps.
// The parameters agree to f32 rounding of the gradient sums (reduce-scatter against
// all-reduce: 2e-8 measured on 3 ranks, 1e-6 asserted); the convolution's output is NHWC in both.
TEST(ChannelsLastDist, F32FullyShardedEqualsDdpWithNhwcConvolutions) {
  auto world = dist::world();
  const int r = world->rank();
  auto f32_model = [] {
    auto m = model();
    m->to(kF32);
    m->to(MemoryFormat::kChannelsLast);
    return m;
  };
  auto ddp_model = f32_model(), fsdp_model = f32_model();
  bool conv_nhwc[2] = {false, false};
  for (int k = 0; k < 2; ++k) {
    auto& m = k == 0 ? ddp_model : fsdp_model;
    m->children()[2]->register_forward_hook([&conv_nhwc, k](nn::Module&, const Variable& y) {
      conv_nhwc[k] = y.data().is_channels_last() && !y.data().is_contiguous();
      return y;
    });
  }
  DistributedDataParallel ddp(ddp_model, world);
  FullyShardedDataParallel fsdp(fsdp_model, world, FullyShardedOptions().min_num_params(50));
  auto ddp_opt = sgd(ddp_model->parameters());
  auto fsdp_opt = sgd(fsdp.shard_parameters());
  for (int step = 0; step < 3; ++step) {
    ddp_opt->zero_grad();
    fsdp_opt->zero_grad();
    auto [x, y] = batch(step, r, true);
    x = x.to(kF32).contiguous(MemoryFormat::kChannelsLast);  // to(dtype) gives NCHW
    ASSERT_TRUE(x.is_channels_last());
    cross_entropy(ddp.forward(Variable(x)), y).backward();
    cross_entropy(fsdp.forward(Variable(x)), y).backward();
    EXPECT_TRUE(conv_nhwc[0] && conv_nhwc[1]) << "step " << step;
    ddp_opt->step();
    fsdp_opt->step();
  }
  const StateDict want = ddp_model->state_dict(), got = fsdp.state_dict();
  for (const auto& [name, t] : want) {
    const bool buffer = name.find("running") != std::string::npos ||
                        name.find("num_batches") != std::string::npos;
    if (buffer) continue;  // DDP broadcasts rank 0's buffers, FSDP keeps each rank's
    ASSERT_TRUE(got.contains(name)) << name;
    EXPECT_LT(max_abs_diff(got.at(name), t), 1e-6) << name;
  }
}

}  // namespace
}  // namespace dist
}  // namespace tessera
