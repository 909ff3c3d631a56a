// A ResNet-18 step with channels-last activations (Module::to(MemoryFormat::kChannelsLast))
// against the same step in NCHW, from the same seed and batch:
//   - f32: the 3x3 layers of 32-256 channels run Winograd's F(4x4, 3x3) in both layouts
//     (tensor/accelerator.h); the other channels-last convolutions run oneDNN's direct
//     primitives on NHWC, the NCHW ones mostly tessera's own kernels: each within about 1e-6 of
//     f64, so the loss agrees to 1e-5 and every
//     parameter's gradient to 1e-4 (relative norm; about 1e-5 measured). The test takes one
//     step at 128x128, so the last blocks see 4x4 maps. On smaller maps batch norm gets
//     channels whose values are all equal (their inputs dead after the ReLU), where rounding
//     alone decides the sign of each normalized value and so the ReLU's mask: at 64x64 and
//     batch 8, f64 itself with its input moved by 1e-7 changed gradients by 1.5% (two seeds of
//     four); at batch 4, f32 runs differed from f64 by 1-2% or by 1e-5 as such signs fell.
//   - bf16 autocast on a CPU whose bf16 convolutions run on oneDNN: the activations are NHWC
//     from the stem on (checked on the stem's output). Where those convolutions prefer NHWC
//     (Backend::prefers_channels_last: AMX) the NCHW model runs NHWC too, from the stem's
//     output on, and so gives the channels-last model's bits. With that turned off
//     (set_allow_preferred_layout(false)), and on other CPUs, the NCHW model stays NCHW: the
//     convolutions give the NCHW path's bits (tests/tensor/channels_last_conv_test.cc; the weight
//     gradients that run as matmuls on NHWC within one bf16 rounding) while batch norm adds
//     its sums in another order, so the two bf16 runs differ by rounding, which a
//     bf16 ResNet amplifies through its depth (either run's gradients are 25-45% from f32's at
//     init). The reference is then f32: the channels-last gradients must be no farther from it
//     than the NCHW bf16 ones (the loss within 1%).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include "models/resnet.h"
#include "tensor/accelerator.h"
#include "tensor/backend.h"
#include "tests/models/layout_training.h"

namespace tessera {
namespace {

// ResNet-18's run from seed 5: NCHW or channels-last; the stem's output says which it ran.
TrainingRun train(bool channels_last, std::optional<DType> amp, int steps, int64_t size) {
  manual_seed(5);
  auto model = models::ResNet18(3, 10);
  if (channels_last) model->to(MemoryFormat::kChannelsLast);
  return train_steps(*model, steps, size, 3, /*momentum=*/0, amp);
}

bool ran_nhwc(const TrainingRun& run) {
  return run.stem_output.is_channels_last() && !run.stem_output.is_contiguous();
}

TEST(ChannelsLastTraining, F32ResNetMatchesTheNchwRun) {
  const TrainingRun a = train(false, std::nullopt, 1, 128), b = train(true, std::nullopt, 1, 128);
  EXPECT_FALSE(ran_nhwc(a));
  EXPECT_TRUE(ran_nhwc(b));
  for (size_t s = 0; s < a.losses.size(); ++s) {
    EXPECT_NEAR(b.losses[s], a.losses[s], 1e-5 * a.losses[s]) << "step " << s;
  }
  double worst = 0;
  for (size_t k = 0; k < a.grads.size(); ++k) {
    const double e = norm(sub(b.grads[k], a.grads[k])) / norm(a.grads[k]);
    EXPECT_LE(e, 1e-4) << "parameter " << k;
    worst = std::max(worst, e);
  }
  std::printf("largest relative gradient difference, channels-last against NCHW: %.2e\n", worst);
}

TEST(ChannelsLastTraining, Bf16ResNetIsAsCloseToF32AsTheNchwRun) {
  if (!backend(Device::cpu()).channels_last(ChannelsLastKernel::kConv2d, kBF16)) {
    GTEST_SKIP() << "this CPU runs bf16 convolutions on widened copies (no AVX-512 BF16), in NCHW";
  }
  const TrainingRun nhwc = train(true, kBF16, 1, 64);
  EXPECT_TRUE(ran_nhwc(nhwc));
  const bool allowed = allow_preferred_layout();
  if (backend(Device::cpu()).prefers_channels_last(ChannelsLastKernel::kConv2d, kBF16)) {
    set_allow_preferred_layout(true);
    const TrainingRun preferred = train(false, kBF16, 1, 64);
    EXPECT_TRUE(ran_nhwc(preferred));
    EXPECT_EQ(nhwc.losses[0], preferred.losses[0]);
    for (size_t k = 0; k < preferred.grads.size(); ++k) {
      EXPECT_EQ(norm(sub(nhwc.grads[k], preferred.grads[k])), 0.0) << "parameter " << k;
    }
  }
  set_allow_preferred_layout(false);
  const TrainingRun nchw = train(false, kBF16, 1, 64);
  set_allow_preferred_layout(allowed);
  EXPECT_FALSE(ran_nhwc(nchw));
  const TrainingRun f32 = train(false, std::nullopt, 1, 64);
  EXPECT_NEAR(nhwc.losses[0], nchw.losses[0], 0.01 * nchw.losses[0]);
  double all_nchw = 0, all_nhwc = 0;
  for (size_t k = 0; k < f32.grads.size(); ++k) {
    const double ref = norm(f32.grads[k]);
    const double e_nchw = norm(sub(nchw.grads[k], f32.grads[k])) / ref;
    const double e_nhwc = norm(sub(nhwc.grads[k], f32.grads[k])) / ref;
    EXPECT_LE(e_nhwc, 1.3 * e_nchw + 0.02) << "parameter " << k;
    all_nchw += e_nchw * e_nchw;
    all_nhwc += e_nhwc * e_nhwc;
  }
  EXPECT_LE(std::sqrt(all_nhwc), 1.1 * std::sqrt(all_nchw) + 0.01);
}

}  // namespace
}  // namespace tessera
