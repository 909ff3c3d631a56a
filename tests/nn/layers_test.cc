// Layers: forward against values computed by hand, gradients by gradcheck, PyTorch's default
// initialization bounds, bad input errors.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/gradcheck.h"
#include "autograd/grad_mode.h"
#include "nn/nn.h"
#include "tensor/ops.h"

namespace tessera {
namespace nn {
namespace {

TEST(Linear, ForwardByHand) {
  Linear fc(2, 2);
  Tensor(fc.weight().data()).copy_(from_vector<float>({1, 2, 3, 4}, {2, 2}));
  Tensor(fc.bias().data()).copy_(from_vector<float>({10, 20}, {2}));
  const Variable y = fc.forward(Variable(from_vector<float>({1, 1, 0, -1}, {2, 2})));
  // rows: [1,1] -> [1+2+10, 3+4+20]; [0,-1] -> [-2+10, -4+20]
  EXPECT_EQ(y.data().to_vector<float>(), (std::vector<float>{13, 27, 8, 16}));
  EXPECT_THROW(fc.forward(Variable(ones({2, 3}))), Error);
}

TEST(Linear, DefaultInitIsUniformWithinOneOverSqrtFanIn) {
  Linear fc(400, 300);
  const double bound = 1 / std::sqrt(400.0);
  EXPECT_LE(amax(abs(fc.weight().data())).item(), bound);
  EXPECT_GT(amax(abs(fc.weight().data())).item(), 0.95 * bound);
  // U(-b, b) has variance b^2 / 3.
  EXPECT_NEAR(var(fc.weight().data()).item(), bound * bound / 3, 0.05 * bound * bound / 3);
  EXPECT_LE(amax(abs(fc.bias().data())).item(), bound);
}

TEST(Conv2d, ForwardByHandAndInit) {
  Conv2d conv(Conv2dOptions(1, 1, 2).bias(false));
  Tensor(conv.weight().data()).copy_(from_vector<float>({1, 0, 0, -1}, {1, 1, 2, 2}));
  const Variable y = conv.forward(Variable(arange(0, 9, 1, kF32).view({1, 1, 3, 3})));
  // Each output is x[i][j] - x[i+1][j+1] = -4.
  EXPECT_EQ(y.data().to_vector<float>(), (std::vector<float>{-4, -4, -4, -4}));
  Conv2d big(Conv2dOptions(16, 32, 3));
  EXPECT_LE(amax(abs(big.weight().data())).item(), 1 / std::sqrt(16.0 * 9));
  EXPECT_THROW(Conv2d(Conv2dOptions(3, 4, 3).groups(2)), Error);
}

TEST(BatchNorm2d, TrainingUsesBatchStatsAndEvalUsesRunningStats) {
  BatchNorm2d bn(BatchNorm2dOptions(2).momentum(0.5));
  const Tensor x = from_vector<float>({1, 3, 10, 30, 5, 7, 50, 70}, {2, 2, 1, 2});
  const Variable y = bn.forward(Variable(x));
  // Channel 0 holds {1, 3, 5, 7}: mean 4, biased var 5.
  EXPECT_NEAR(y.data().at({0, 0, 0, 0}), (1 - 4) / std::sqrt(5 + 1e-5), 1e-5);
  // Running stats: 0.5 * 0 + 0.5 * 4; 0.5 * 1 + 0.5 * unbiased var (20/3).
  EXPECT_NEAR(bn.running_mean().data().at({0}), 2.0, 1e-6);
  EXPECT_NEAR(bn.running_var().data().at({0}), 0.5 + 0.5 * 20.0 / 3, 1e-5);
  EXPECT_EQ(bn.state_dict().at("num_batches_tracked").item(), 1);
  bn.eval();
  const Variable z = bn.forward(Variable(x));
  EXPECT_NEAR(z.data().at({0, 0, 0, 0}), (1 - 2.0) / std::sqrt(0.5 + 10.0 / 3 + 1e-5), 1e-5);
  EXPECT_EQ(bn.state_dict().at("num_batches_tracked").item(), 1);  // eval does not count
  EXPECT_THROW(bn.forward(Variable(ones({2, 3, 1, 1}))), Error);
}

// Deferred statistics: two halves of a batch normalized each with its own statistics, and the
// running statistics updated once at commit, as one ordinary forward over the whole batch does.
TEST(BatchNorm2d, DeferredStatisticsEqualOneForwardOverTheWholeBatch) {
  Generator g(9);
  const Tensor x = add(mul(randn({8, 3, 4, 4}, kF32, &g), 3.0), 1.5);
  BatchNorm2d whole(BatchNorm2dOptions(3).momentum(0.3)), deferred(BatchNorm2dOptions(3).momentum(0.3));
  whole.forward(Variable(x));
  deferred.defer_running_statistics(true);
  const Variable half = deferred.forward(Variable(x.narrow(0, 0, 4)));
  deferred.forward(Variable(x.narrow(0, 4, 4)));
  // Before the commit nothing moved; each half was normalized with its own statistics.
  EXPECT_EQ(amax(abs(deferred.running_mean().data())).item(), 0);
  EXPECT_EQ(deferred.state_dict().at("num_batches_tracked").item(), 0);
  BatchNorm2d plain(BatchNorm2dOptions(3));
  EXPECT_LT(max_abs_diff(half.data(), plain.forward(Variable(x.narrow(0, 0, 4))).data()), 1e-6);
  deferred.commit_running_statistics();
  EXPECT_LT(max_abs_diff(deferred.running_mean().data(), whole.running_mean().data()), 1e-6);
  EXPECT_LT(max_abs_diff(deferred.running_var().data(), whole.running_var().data()), 1e-5);
  EXPECT_EQ(deferred.state_dict().at("num_batches_tracked").item(), 1);
  deferred.commit_running_statistics();  // nothing accumulated: no change
  EXPECT_EQ(deferred.state_dict().at("num_batches_tracked").item(), 1);
  deferred.forward(Variable(x));
  EXPECT_THROW(deferred.defer_running_statistics(false), Error);  // uncommitted values
}

// forward_relu(x, residual) is relu(forward(x) + residual) in one op: the same output,
// running statistics, batch count and gradients (input, parameters, residual), in training,
// eval and deferred mode; it runs the module's forward hooks; BNReLU2d is forward_relu as a
// layer, with BatchNorm2d's state dict.
TEST(BatchNorm2d, ForwardReluEqualsForwardThenAddThenRelu) {
  Generator g(11);
  const Tensor x = randn({3, 5, 3, 7}, kF32, &g), res = randn({3, 5, 3, 7}, kF32, &g);
  BatchNorm2d fused(BatchNorm2dOptions(5).momentum(0.2)), plain(BatchNorm2dOptions(5).momentum(0.2));
  const Tensor w = randn({5}, kF32, &g), b = randn({5}, kF32, &g);
  for (BatchNorm2d* bn : {&fused, &plain}) {
    Tensor weight = bn->weight().data(), bias = bn->bias().data();
    weight.copy_(w);
    bias.copy_(b);
  }
  int pre = 0, post = 0;
  fused.register_forward_pre_hook([&](Module&) { ++pre; });
  fused.register_forward_hook([&](Module&, const Variable& out) { ++post; return out; });
  for (int mode = 0; mode < 3; ++mode) {  // training, deferred, eval
    if (mode == 1) {
      fused.defer_running_statistics(true);
      plain.defer_running_statistics(true);
    }
    if (mode == 2) {
      fused.eval();
      plain.eval();
    }
    const Variable xf(x, true), xp(x, true), rf(res, true), rp(res, true);
    const Variable yf = fused.forward_relu(xf, rf);
    const Variable yp = relu(add(plain.forward(xp), rp));
    EXPECT_LT(max_abs_diff(yf.data(), yp.data()), 1e-6) << "mode " << mode;
    sum(mul(yf, yf)).backward();
    sum(mul(yp, yp)).backward();
    EXPECT_LT(max_abs_diff(xf.grad(), xp.grad()), 1e-5) << "mode " << mode;
    EXPECT_LT(max_abs_diff(rf.grad(), rp.grad()), 1e-5) << "mode " << mode;
    EXPECT_LT(max_abs_diff(fused.weight().grad(), plain.weight().grad()), 1e-4);
    EXPECT_LT(max_abs_diff(fused.bias().grad(), plain.bias().grad()), 1e-4);
    fused.zero_grad();
    plain.zero_grad();
    if (mode == 1) {
      fused.commit_running_statistics();
      plain.commit_running_statistics();
      fused.defer_running_statistics(false);
      plain.defer_running_statistics(false);
    }
    const StateDict a = fused.state_dict(), b = plain.state_dict();
    for (const char* key : {"running_mean", "running_var", "num_batches_tracked"}) {
      EXPECT_EQ(max_abs_diff(a.at(key), b.at(key)), 0) << key << ", mode " << mode;
    }
  }
  EXPECT_EQ(pre, 3);
  EXPECT_EQ(post, 3);
  // Without a residual: relu(forward(x)).
  EXPECT_LT(max_abs_diff(fused.forward_relu(Variable(x)).data(),
                         relu(plain.forward(Variable(x))).data()),
            1e-6);

  BNReLU2d layer(5);
  BatchNorm2d reference(5);
  EXPECT_EQ(layer.type_name(), "BNReLU2d");
  const auto names = [](const StateDict& d) {
    std::vector<std::string> out;
    for (const auto& [name, tensor] : d) out.push_back(name);
    return out;
  };
  EXPECT_EQ(names(layer.state_dict()), names(reference.state_dict()));
  EXPECT_LT(max_abs_diff(layer(Variable(x)).data(), relu(reference(Variable(x))).data()), 1e-6);
  EXPECT_EQ(max_abs_diff(layer.running_var().data(), reference.running_var().data()), 0);
}

TEST(Layers, PoolingFlattenDropoutIdentity) {
  const Variable x(arange(0, 16, 1, kF32).view({1, 1, 4, 4}));
  EXPECT_EQ(MaxPool2d(Pool2dOptions(2)).forward(x).data().to_vector<float>(),
            (std::vector<float>{5, 7, 13, 15}));
  EXPECT_EQ(AvgPool2d(Pool2dOptions(2)).forward(x).data().to_vector<float>(),
            (std::vector<float>{2.5, 4.5, 10.5, 12.5}));
  EXPECT_EQ(AdaptiveAvgPool2d(1).forward(x).data().item(), 7.5);
  EXPECT_EQ(Flatten().forward(x).shape(), (Shape{1, 16}));
  Dropout drop(0.5);
  drop.eval();
  EXPECT_TRUE(drop.forward(x).is_same(x));
  EXPECT_TRUE(Identity().forward(x).is_same(x));
  EXPECT_EQ(ReLU().forward(Variable(from_vector<float>({-1, 2}, {2}))).data().to_vector<float>(),
            (std::vector<float>{0, 2}));
}

// Central finite differences of <r, model(x)> with respect to every element of the input and
// of every parameter, against the gradients backward accumulates.
void expect_module_gradients(Module& model, const Tensor& input) {
  Generator g(9);
  Variable x(input.clone(), true);
  const Tensor r = randn(model.forward(x).shape(), kF64, &g);
  model.zero_grad();
  sum(model.forward(x) * Variable(r)).backward();
  auto loss = [&]() {
    NoGradGuard no_grad;
    return sum(mul(model.forward(Variable(x.data())).data(), r)).item();
  };
  std::vector<Variable> targets = model.parameters();
  targets.insert(targets.begin(), x);
  for (const Variable& v : targets) {
    double* data = v.data().data<double>();
    const std::vector<double> analytic = v.grad().to_vector<double>();
    for (int64_t i = 0; i < v.numel(); ++i) {
      const double saved = data[i];
      data[i] = saved + 1e-6;
      const double plus = loss();
      data[i] = saved - 1e-6;
      const double minus = loss();
      data[i] = saved;
      const double numeric = (plus - minus) / 2e-6;
      ASSERT_NEAR(analytic[i], numeric, 1e-6 + 1e-4 * std::fabs(numeric))
          << (v.name().empty() ? "input" : v.name()) << " element " << i;
    }
  }
}

TEST(Layers, GradientsThroughModulesMatchFiniteDifferences) {
  manual_seed(3);
  Sequential model{std::make_shared<Conv2d>(Conv2dOptions(2, 3, 3).padding(1).stride(2)),
                   std::make_shared<BatchNorm2d>(3), std::make_shared<Tanh>(),
                   std::make_shared<MaxPool2d>(Pool2dOptions(2)), std::make_shared<Flatten>(),
                   std::make_shared<Linear>(3, 4), std::make_shared<Sigmoid>()};
  model.to(kF64);
  expect_module_gradients(model, randn({3, 2, 4, 4}, kF64));
  model.eval();  // eval-mode batch norm: running statistics are constants
  expect_module_gradients(model, randn({3, 2, 4, 4}, kF64));
}

}  // namespace
}  // namespace nn
}  // namespace tessera
