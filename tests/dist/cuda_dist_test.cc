// Distributed training on CUDA tensors, under mpirun with 1 and 2 ranks:
// - the NCCL group (a GPU per rank; with world size 1 on a one-GPU machine): every collective
//   against the values written out, and the ring volume in the byte ledger;
// - DDP and ZeRO-1 with CUDA parameters (NCCL when each rank has its own GPU, else the MPI group
//   staging through the host, which is how several ranks share one GPU) against one process on
//   the whole batch on the CPU.
// Skips, naming the reason, without CUDA or a GPU.
#include <gtest/gtest.h>

#include "autograd/functions.h"
#include "dist/ddp/ddp.h"
#include "dist/device_groups.h"
#include "dist/environment.h"
#include "dist/zero/zero_optimizer.h"
#include "models/simple.h"
#include "nn/nn.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "tensor/accelerator.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {
namespace {

class CudaDist : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_is_available()) GTEST_SKIP() << "no CUDA: " << cuda_unavailable_reason();
    world_ = dist::world();
    // NCCL needs a GPU of its own per rank; otherwise the multi-rank logic runs over MPI.
    own_gpu_ = world_->size() <= device_count(DeviceType::kCUDA);
    gpu_ = Device::cuda(own_gpu_ ? world_->rank() : 0);
  }
  std::shared_ptr<ProcessGroup> world_;
  bool own_gpu_ = false;
  Device gpu_;
};

TEST_F(CudaDist, NcclCollectivesGiveTheWrittenOutValues) {
  if (!own_gpu_) GTEST_SKIP() << world_->size() << " ranks share " << device_count(DeviceType::kCUDA)
                              << " GPU(s): NCCL needs one per rank";
  ASSERT_TRUE(has_device_group_factory(DeviceType::kCUDA));
  auto nccl = group_for_device(world_, gpu_);
  ASSERT_NE(nccl, world_) << "a CUDA build should give an NCCL group for CUDA tensors";
  EXPECT_EQ(group_for_device(world_, gpu_), nccl) << "cached per (group, device)";
  const int n = world_->size(), r = world_->rank();

  // all_reduce: rank r contributes (r + 1) * [0, 1, ..., 9].
  Tensor x = mul(arange(10, TensorOptions(kF32).device(gpu_)), double(r + 1));
  nccl->ledger().reset();
  nccl->all_reduce(x)->wait();  // orders our stream after NCCL; no host wait
  const double factor = n * (n + 1) / 2.0;
  EXPECT_TRUE(allclose(x.cpu(), mul(arange(10, kF32), factor), 0, 0));
  EXPECT_EQ(nccl->ledger().entry(CollectiveKind::kAllReduce).bytes, 2 * (n - 1) * 40 / n);

  // reduce_scatter and all_gather with uneven counts (7 elements over n ranks).
  const std::vector<int64_t> counts = balanced_counts(7, n);
  Tensor in = full({7}, double(r + 1), TensorOptions(kF64).device(gpu_));
  Tensor out = zeros({counts[r]}, TensorOptions(kF64).device(gpu_));
  nccl->reduce_scatter(in, out, counts)->wait();
  EXPECT_TRUE(allclose(out.cpu(), full({counts[r]}, factor, kF64), 0, 0));
  Tensor gathered = zeros({7}, TensorOptions(kF64).device(gpu_));
  nccl->all_gather(full({counts[r]}, double(r), TensorOptions(kF64).device(gpu_)), gathered, counts)
      ->wait();
  std::vector<double> expected;
  for (int k = 0; k < n; ++k) expected.insert(expected.end(), counts[k], double(k));
  EXPECT_EQ(gathered.to_vector<double>(), expected);

  Tensor b = full({5}, r == 0 ? 3.0 : -1.0, TensorOptions(kBF16).device(gpu_));
  nccl->broadcast(b, 0)->wait();
  EXPECT_EQ(b.to_vector<double>(), std::vector<double>(5, 3.0));
  nccl->barrier()->wait();
  EXPECT_THROW(nccl->all_reduce(ones({3})), Error);  // a CPU tensor on the NCCL group
}

constexpr int64_t kPerRank = 4;

// Class labels 0..9, 0..9, ... for a batch of `count`.
Tensor labels(int64_t count) {
  std::vector<int64_t> y(count);
  for (int64_t i = 0; i < count; ++i) y[i] = i % 10;
  return from_vector<int64_t>(y, {count});
}

std::shared_ptr<nn::Sequential> mlp() {
  manual_seed(11);
  return models::MLP(784, 32, 10);
}

void expect_same_parameters(nn::Module& cpu, nn::Module& gpu) {
  const auto a = cpu.parameters(), b = gpu.parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(b[i].data().device().is_cuda());
    EXPECT_TRUE(allclose(b[i].data().cpu(), a[i].data(), 1e-4, 1e-5)) << "parameter " << i;
  }
}

TEST_F(CudaDist, DdpOnCudaEqualsOneCpuProcessOnTheWholeBatch) {
  const int n = world_->size(), r = world_->rank();
  auto reference = mlp();
  optim::SGD ref_opt(reference->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  auto local = mlp();
  local->to(gpu_);
  DistributedDataParallel ddp(local, world_, DDPOptions().use_device_group(own_gpu_));
  optim::SGD opt(local->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  for (int step = 0; step < 3; ++step) {
    Generator g(100 + step);
    const Tensor x = randn({kPerRank * n, 1, 28, 28}, kF32, &g);
    const Tensor y = labels(kPerRank * n);
    ref_opt.zero_grad();
    cross_entropy(reference->forward(Variable(x)), y).backward();
    ref_opt.step();
    opt.zero_grad();
    const Tensor xs = x.narrow(0, r * kPerRank, kPerRank).to(gpu_);
    const Tensor ys = y.narrow(0, r * kPerRank, kPerRank).to(gpu_);
    cross_entropy(ddp.forward(Variable(xs)), ys).backward();
    opt.step();
  }
  expect_same_parameters(*reference, *local);
}

TEST_F(CudaDist, ZeroOneOnCudaEqualsOneCpuProcessOnTheWholeBatch) {
  const int n = world_->size(), r = world_->rank();
  auto reference = mlp();
  optim::Adam ref_opt(reference->parameters(), optim::AdamOptions(1e-2));
  auto local = mlp();
  local->to(gpu_);
  ZeroRedundancyOptimizer zero(
      local->parameters(), world_,
      [](std::vector<Variable> shard) {
        return std::make_unique<optim::Adam>(shard, optim::AdamOptions(1e-2));
      },
      ZeroOptions().use_device_group(own_gpu_));
  for (int step = 0; step < 3; ++step) {
    Generator g(200 + step);
    const Tensor x = randn({kPerRank * n, 1, 28, 28}, kF32, &g);
    const Tensor y = labels(kPerRank * n);
    ref_opt.zero_grad();
    cross_entropy(reference->forward(Variable(x)), y).backward();
    ref_opt.step();
    zero.zero_grad();
    // Each rank's loss is its slice's mean; ZeRO averages the gradients over ranks.
    cross_entropy(local->forward(Variable(x.narrow(0, r * kPerRank, kPerRank).to(gpu_))),
                  y.narrow(0, r * kPerRank, kPerRank).to(gpu_))
        .backward();
    zero.step();
  }
  expect_same_parameters(*reference, *local);
}

}  // namespace
}  // namespace dist
}  // namespace tessera
