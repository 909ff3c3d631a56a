// Half-precision parameters with f32 master weights (DeepSpeed's fp16 mode): a model moved to
// f16 (or bf16) trains with Adam and the GradScaler, tracking the f32 model; the parameters
// stay half, the optimizer holds the f32 master copy and its moments (12 bytes per parameter),
// a skipped step leaves master and parameters untouched, and a conv net whose BatchNorm is
// kept f32 trains too.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "models/simple.h"
#include "nn/nn.h"
#include "optim/adam.h"
#include "optim/grad_scaler.h"
#include "tensor/ops.h"

namespace tessera {
namespace optim {
namespace {

struct Data {
  Tensor x, y;
};

Data data() {
  Generator g(5);
  const Tensor x = randn({64, 20}, kF32, &g);
  return {x, argmax(matmul(x, randn({20, 4}, kF32, &g)), 1)};
}

// Trains `model` (whose parameters are in `param_dtype`) for `steps` steps, under autocast to
// param_dtype when it is half (so the loss is computed in f32). Returns the losses.
std::vector<double> train(nn::Module& model, nn::Module& layer, DType param_dtype, int steps,
                          GradScaler& scaler, Adam& opt) {
  const Data d = data();
  std::vector<double> losses;
  for (int step = 0; step < steps; ++step) {
    opt.zero_grad();
    Variable loss;
    {
      AutocastGuard autocast(param_dtype == kF32 ? kF16 : param_dtype, param_dtype != kF32);
      loss = cross_entropy(layer.forward(Variable(d.x.to(param_dtype))), d.y);
    }
    losses.push_back(loss.item());
    scaler.scale(loss).backward();
    scaler.step(opt);
    scaler.update();
  }
  for (const Variable& p : model.parameters()) EXPECT_EQ(p.dtype(), param_dtype);
  return losses;
}

TEST(HalfPrecisionParameters, F16AndBF16ModelsTrackF32) {
  const auto run = [](DType dtype) {
    manual_seed(3);
    auto model = models::MLP(20, 32, 4);
    model->to(dtype);
    Adam opt(model->parameters(), AdamOptions(1e-2));
    GradScaler scaler(GradScalerOptions().enabled(dtype == kF16));
    const std::vector<double> losses = train(*model, *model, dtype, 40, scaler, opt);
    return std::make_pair(losses, opt.state_bytes());
  };
  const auto [f32, f32_bytes] = run(kF32);
  EXPECT_LT(f32.back(), 0.3 * f32.front());
  for (const auto& [dtype, tol] : {std::pair<DType, double>{kF16, 0.005}, {kBF16, 0.02}}) {
    const auto [half, bytes] = run(dtype);
    double worst = 0;
    for (size_t i = 0; i < f32.size(); ++i) worst = std::max(worst, std::abs(half[i] - f32[i]));
    EXPECT_LT(worst, tol) << dtype_name(dtype) << " parameters: largest loss difference " << worst;
    std::printf("%s parameters: loss %.4f -> %.4f (f32 %.4f -> %.4f), max |diff| %.4f\n",
                dtype_name(dtype), half.front(), half.back(), f32.front(), f32.back(), worst);
    // Adam's K = 12 bytes per parameter: master 4 + exp_avg 4 + exp_avg_sq 4 (f32 has no master).
    const int64_t n = 20 * 32 + 32 + 32 * 4 + 4;
    EXPECT_EQ(bytes, 12 * n);
    EXPECT_EQ(f32_bytes, 8 * n);
  }
}

TEST(HalfPrecisionParameters, SkippedStepLeavesMasterAndParametersAlone) {
  manual_seed(3);
  auto model = models::MLP(20, 8, 4);
  model->to(kF16);
  const auto params = model->parameters();
  Adam opt(params, AdamOptions(1e-2));
  GradScaler scaler(GradScalerOptions().init_scale(1024));
  const Data d = data();
  const auto iteration = [&](bool poison) {
    opt.zero_grad();
    Variable loss;
    {
      AutocastGuard autocast(kF16);
      loss = cross_entropy(model->forward(Variable(d.x.to(kF16))), d.y);
    }
    scaler.scale(loss).backward();
    EXPECT_EQ(params[0].grad().dtype(), kF16);
    if (poison) Tensor(params[2].grad()).fill_(std::numeric_limits<double>::infinity());
    const bool stepped = scaler.step(opt);
    scaler.update();
    return stepped;
  };
  ASSERT_TRUE(iteration(false));
  const StateDict state = opt.state_dict();
  ASSERT_TRUE(state.contains("state.0.master"));
  EXPECT_EQ(state.at("state.0.master").dtype(), kF32);
  std::vector<Tensor> before;
  for (const Variable& p : params) before.push_back(p.data().clone());
  EXPECT_FALSE(iteration(true));
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(allclose(params[i].data(), before[i], 0, 0)) << i;
  }
  for (const auto& [name, t] : state) {
    EXPECT_TRUE(allclose(opt.state_dict().at(name), t, 0, 0)) << name;
  }
  EXPECT_EQ(scaler.get_scale(), 512.0);
  EXPECT_TRUE(iteration(false));
  EXPECT_EQ(opt.state_dict().at("state.0.step").item(), 2.0);
}

TEST(HalfPrecisionParameters, ConvNetWithF32BatchNormTrains) {
  manual_seed(4);
  auto bn = std::make_shared<nn::BatchNorm2d>(4);
  auto net = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Conv2d>(nn::Conv2dOptions(1, 4, 3).padding(1)), bn,
      std::make_shared<nn::ReLU>(), std::make_shared<nn::Flatten>(),
      std::make_shared<nn::Linear>(4 * 6 * 6, 3)});
  // Module::to(kF16) converts every module but BatchNorm, which stays in f32.
  net->to(kF16);
  for (const auto& [name, p] : bn->named_parameters()) EXPECT_EQ(p.dtype(), kF32) << name;
  Adam opt(net->parameters(), AdamOptions(1e-2));
  GradScaler scaler;
  Generator g(6);
  const Tensor x = randn({16, 1, 6, 6}, kF32, &g).to(kF16);
  const Tensor y = from_vector<int64_t>({0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0}, {16});
  double first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    opt.zero_grad();
    Variable loss;
    {
      AutocastGuard autocast(kF16);
      loss = cross_entropy(net->forward(Variable(x)), y);
    }
    (step == 0 ? first : last) = loss.item();
    scaler.scale(loss).backward();
    EXPECT_EQ(bn->named_parameters()[0].second.grad().dtype(), kF32);
    scaler.step(opt);
    scaler.update();
  }
  EXPECT_LT(last, 0.5 * first);
  EXPECT_EQ(bn->named_parameters()[0].second.dtype(), kF32);
}

}  // namespace
}  // namespace optim
}  // namespace tessera
