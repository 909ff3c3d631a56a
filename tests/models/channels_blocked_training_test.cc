// ResNet steps with channels-blocked activations (Module::to(MemoryFormat::kChannelsBlocked):
// oneDNN's nChw16c between layers, f32 on the CPU) against the same steps in NCHW, from the same
// seed and batches. Every convolution of the blocked model runs oneDNN's primitives in their
// own layout (Winograd's where the NCHW run takes it too), the NCHW model's mostly tessera's
// kernels; batch norm adds its sums in another order. Each is within about 1e-6 of f64, so the
// losses agree to 1e-5 and every parameter's gradient to 1e-4 (relative norm), as for
// channels-last (channels_last_training_test.cc says why the maps stay at 4x4 and more).
// ResNet-18 runs one training step at 128x128. ResNet-50 (bottlenecks, 1x1 layers, strided
// projections, the residual sums' gradients) runs in eval mode at 64x64: in training mode at
// batch 4 its fifty batch norms amplify rounding so far that two trusted paths disagree
// (channels-last against NCHW: 2.5% on the gradients at 128x128, while eval mode gives 3e-6);
// batch norm's training kernels on blocked tensors are held to NCHW's in
// tests/tensor/channels_blocked_test.cc. ResNet-20 (one input channel, as Fashion-MNIST's)
// subsamples its shortcut by slicing the activations and pads it by cat: differentiable shape
// ops that take channels-blocked tensors as NCHW copies (autograd/functions_shape.cc).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

#include "models/resnet.h"
#include "tensor/backend.h"
#include "tests/models/layout_training.h"

namespace tessera {
namespace {

// One model's run: NCHW, or channels-blocked from the start.
TrainingRun train(std::shared_ptr<nn::Sequential> model, bool blocked, int steps, int64_t size,
                  bool eval = false, int64_t in_channels = 3) {
  if (blocked) model->to(MemoryFormat::kChannelsBlocked);
  if (eval) model->eval();
  return train_steps(*model, steps, size, in_channels, /*momentum=*/0.9);
}

void expect_runs_match(const TrainingRun& nchw, const TrainingRun& blocked) {
  EXPECT_FALSE(nchw.stem_output.is_channels_blocked());
  EXPECT_TRUE(blocked.stem_output.is_channels_blocked());
  for (size_t s = 0; s < nchw.losses.size(); ++s) {
    EXPECT_NEAR(blocked.losses[s], nchw.losses[s], 1e-5 * nchw.losses[s]) << "step " << s;
  }
  double worst = 0;
  ASSERT_EQ(blocked.grads.size(), nchw.grads.size());
  for (size_t k = 0; k < nchw.grads.size(); ++k) {
    EXPECT_TRUE(blocked.grads[k].is_contiguous()) << "parameter " << k;
    const double e = norm(sub(blocked.grads[k], nchw.grads[k])) / norm(nchw.grads[k]);
    EXPECT_LE(e, 1e-4) << "parameter " << k;
    worst = std::max(worst, e);
  }
  std::printf("largest relative gradient difference, channels-blocked against NCHW: %.2e\n",
              worst);
}

bool cpu_runs_blocked() {
  return backend(Device::cpu()).channels_blocked(ChannelsLastKernel::kConv2d, kF32);
}

TEST(ChannelsBlockedTraining, ResNet18MatchesTheNchwRun) {
  ASSERT_TRUE(cpu_runs_blocked());
  manual_seed(5);
  const TrainingRun a = train(models::ResNet18(3, 10), false, 1, 128);
  manual_seed(5);
  const TrainingRun b = train(models::ResNet18(3, 10), true, 1, 128);
  expect_runs_match(a, b);
}

TEST(ChannelsBlockedTraining, ResNet50InEvalModeMatchesTheNchwRun) {
  ASSERT_TRUE(cpu_runs_blocked());
  manual_seed(7);
  const TrainingRun a = train(models::ResNet50(3, 10), false, 1, 64, /*eval=*/true);
  manual_seed(7);
  const TrainingRun b = train(models::ResNet50(3, 10), true, 1, 64, /*eval=*/true);
  expect_runs_match(a, b);
}

TEST(ChannelsBlockedTraining, ResNet20WithSlicedShortcutsMatchesTheNchwRun) {
  ASSERT_TRUE(cpu_runs_blocked());
  manual_seed(9);
  const TrainingRun a = train(models::ResNetCifar(20, 1, 10), false, 2, 28, false, 1);
  manual_seed(9);
  const TrainingRun b = train(models::ResNetCifar(20, 1, 10), true, 2, 28, false, 1);
  expect_runs_match(a, b);
}

}  // namespace
}  // namespace tessera
