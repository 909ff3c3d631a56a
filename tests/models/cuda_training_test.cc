// A ResNet-20 training step (forward, cross-entropy, backward, SGD with momentum) on CUDA
// against the same step on the CPU from the same weights: loss, every gradient, and the
// parameters after three steps. Skips, naming the reason, without CUDA or a GPU.
#include <gtest/gtest.h>

#include "autograd/variable.h"
#include "models/resnet.h"
#include "nn/loss.h"
#include "optim/sgd.h"
#include "tensor/accelerator.h"
#include "tensor/ops.h"

namespace tessera {
namespace {

struct TrainingRun {
  std::shared_ptr<nn::Sequential> model;
  std::unique_ptr<optim::SGD> sgd;
};

TrainingRun make_run(const StateDict& weights, Device device) {
  TrainingRun r;
  r.model = models::ResNet20(1, 10);
  r.model->load_state_dict(weights);
  r.model->to(device);
  r.sgd = std::make_unique<optim::SGD>(r.model->parameters(),
                                       optim::SGDOptions(0.05).momentum(0.9).weight_decay(1e-4));
  return r;
}

double step(TrainingRun& r, const Tensor& images, const Tensor& labels) {
  r.sgd->zero_grad();
  const Variable loss = nn::CrossEntropyLoss()(r.model->forward(Variable(images)), labels);
  loss.backward();
  r.sgd->step();
  return loss.data().item();
}

TEST(CudaTraining, ResNet20StepsMatchTheCpu) {
  if (!cuda_is_available()) GTEST_SKIP() << "no CUDA: " << cuda_unavailable_reason();
  manual_seed(3);
  const StateDict weights = models::ResNet20(1, 10)->state_dict();
  Generator gen(4);
  const Tensor images = normal({8, 1, 28, 28}, 0, 1, kF32, &gen);
  const Tensor labels = from_vector<int64_t>({0, 1, 2, 3, 4, 5, 6, 7}, {8});
  TrainingRun cpu = make_run(weights, Device::cpu());
  TrainingRun gpu = make_run(weights, Device::cuda(0));
  for (int i = 0; i < 3; ++i) {
    const double cpu_loss = step(cpu, images, labels);
    const double gpu_loss = step(gpu, images.to(Device::cuda(0)), labels.to(Device::cuda(0)));
    EXPECT_NEAR(gpu_loss, cpu_loss, 1e-4 * std::abs(cpu_loss)) << "step " << i;
    if (i == 0) {
      const auto cp = cpu.model->named_parameters(), gp = gpu.model->named_parameters();
      ASSERT_EQ(cp.size(), gp.size());
      for (size_t k = 0; k < cp.size(); ++k) {
        const Tensor a = gp[k].second.grad().cpu(), b = cp[k].second.grad();
        const double scale = amax(abs(b)).item() + 1e-12;
        EXPECT_LE(amax(abs(a - b)).item() / scale, 1e-3) << cp[k].first;
      }
    }
  }
  const auto cp = cpu.model->named_parameters(), gp = gpu.model->named_parameters();
  for (size_t k = 0; k < cp.size(); ++k) {
    EXPECT_TRUE(gp[k].second.data().device().is_cuda()) << cp[k].first;
    EXPECT_TRUE(allclose(gp[k].second.data().cpu(), cp[k].second.data(), 1e-3, 1e-4))
        << cp[k].first;
  }
}

}  // namespace
}  // namespace tessera
