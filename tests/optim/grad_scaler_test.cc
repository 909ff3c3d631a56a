// GradScaler against hand-written sequences: scale/unscale arithmetic, PyTorch's defaults,
// skipped steps on injected inf/NaN (parameters and optimizer state untouched, scale backed
// off), growth after growth_interval clean steps, hysteresis, the floor, the error after N
// overflows in a row, unscale_ before clip_grad_norm, misuse errors, the injected found_inf
// reduction, a disabled scaler, and the state_dict round trip (resume is exact).
#include "optim/grad_scaler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "autograd/functions.h"
#include "optim/adam.h"
#include "optim/clip_grad.h"
#include "optim/sgd.h"
#include "tensor/ops.h"

namespace tessera {
namespace optim {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A tiny regression problem: loss = mean((x w - y)^2), w [3].
struct Problem {
  Variable w{from_vector<float>({0.5f, -1.0f, 2.0f}, {3}), true};
  Tensor x = from_vector<float>({1, 2, 3, -1, 0.5f, 2, 0, 1, -2, 3, 1, 1}, {4, 3});
  Tensor y = from_vector<float>({1, -2, 0.5f, 3}, {4});
  Variable loss() const { return mse_loss(matmul(Variable(x), w), Variable(y)); }
};

// One training iteration; `poison` (if not 0) is written into the gradient before stepping.
bool iteration(GradScaler& scaler, Optimizer& opt, Problem& p, double poison = 0) {
  opt.zero_grad();
  scaler.scale(p.loss()).backward();
  if (poison != 0) {
    Tensor g = p.w.grad();
    Tensor(g.narrow(0, 1, 1)).fill_(poison);
  }
  const bool stepped = scaler.step(opt);
  scaler.update();
  return stepped;
}

TEST(GradScaler, PyTorchDefaults) {
  GradScaler scaler;
  EXPECT_TRUE(scaler.is_enabled());
  EXPECT_EQ(scaler.get_scale(), 65536.0);
  EXPECT_EQ(scaler.options().growth_factor(), 2.0);
  EXPECT_EQ(scaler.options().backoff_factor(), 0.5);
  EXPECT_EQ(scaler.options().growth_interval(), 2000);
  EXPECT_EQ(scaler.options().hysteresis(), 1);
}

TEST(GradScaler, ScaleAndUnscaleArithmetic) {
  Problem p;
  const Variable loss = p.loss();
  loss.backward();
  const Tensor true_grad = p.w.grad().clone();
  p.w.zero_grad();

  GradScaler scaler(GradScalerOptions().init_scale(1024));
  const Variable scaled = scaler.scale(p.loss());
  EXPECT_EQ(scaled.item(), loss.item() * 1024);
  scaled.backward();
  // Powers of two: scaling and unscaling are exact.
  EXPECT_TRUE(allclose(p.w.grad(), mul(true_grad, 1024.0), 0, 0));
  SGD opt({p.w}, SGDOptions(0.1));
  scaler.unscale_(opt);
  EXPECT_TRUE(allclose(p.w.grad(), true_grad, 0, 0));

  // An f16 loss is scaled in f32 (65536 would overflow f16).
  const Variable half_loss(full({}, 3.0, kF16));
  const Variable s = GradScaler().scale(half_loss);
  EXPECT_EQ(s.dtype(), kF32);
  EXPECT_EQ(s.item(), 3.0 * 65536);
}

TEST(GradScaler, SkipsStepOnInfOrNanAndBacksOff) {
  for (double poison : {kInf, -kInf, kNaN}) {
    Problem p;
    Adam opt({p.w}, AdamOptions(0.01));
    GradScaler scaler(GradScalerOptions().init_scale(256));
    ASSERT_TRUE(iteration(scaler, opt, p));
    ASSERT_TRUE(iteration(scaler, opt, p));
    const Tensor before = p.w.data().clone();
    const StateDict state_before = opt.state_dict();
    EXPECT_FALSE(iteration(scaler, opt, p, poison));
    // Parameters and optimizer state (Adam's step count and moments) untouched.
    EXPECT_TRUE(allclose(p.w.data(), before, 0, 0));
    const StateDict state_after = opt.state_dict();
    ASSERT_EQ(state_after.size(), state_before.size());
    for (const auto& [name, t] : state_before) {
      EXPECT_TRUE(allclose(state_after.at(name), t, 0, 0)) << name;
    }
    EXPECT_EQ(state_after.at("state.0.step").item(), 2.0);
    EXPECT_EQ(scaler.get_scale(), 128.0);
    EXPECT_EQ(scaler.skipped_steps(), 1);
    // The next clean step goes through at the lower scale.
    EXPECT_TRUE(iteration(scaler, opt, p));
    EXPECT_EQ(opt.state_dict().at("state.0.step").item(), 3.0);
    EXPECT_EQ(scaler.get_scale(), 128.0);
  }
}

TEST(GradScaler, GrowsAfterGrowthIntervalCleanSteps) {
  Problem p;
  SGD opt({p.w}, SGDOptions(0.01));
  GradScaler scaler(GradScalerOptions().init_scale(8).growth_interval(3));
  // A hand-written sequence of (poisoned?, expected scale after update).
  const std::vector<std::pair<bool, double>> seq = {
      {false, 8}, {false, 8}, {false, 16},  // 3 clean: grow
      {false, 16}, {true, 8},               // an overflow resets the tracker and backs off
      {false, 8}, {false, 8}, {false, 16}, {false, 16}, {false, 16}, {false, 32}};
  for (size_t i = 0; i < seq.size(); ++i) {
    EXPECT_EQ(iteration(scaler, opt, p, seq[i].first ? kInf : 0), !seq[i].first) << i;
    EXPECT_EQ(scaler.get_scale(), seq[i].second) << "after iteration " << i;
  }
}

TEST(GradScaler, HysteresisFloorAndConsecutiveSkipError) {
  Problem p;
  SGD opt({p.w}, SGDOptions(0.01));
  GradScaler scaler(GradScalerOptions().init_scale(64).hysteresis(2).min_scale(16));
  iteration(scaler, opt, p, kInf);
  EXPECT_EQ(scaler.get_scale(), 64.0);  // first overflow in a row: held
  iteration(scaler, opt, p, kInf);
  EXPECT_EQ(scaler.get_scale(), 32.0);  // second: back off
  iteration(scaler, opt, p, kInf);
  EXPECT_EQ(scaler.get_scale(), 16.0);
  iteration(scaler, opt, p, kInf);
  EXPECT_EQ(scaler.get_scale(), 16.0);  // the floor
  EXPECT_TRUE(iteration(scaler, opt, p));
  iteration(scaler, opt, p, kInf);
  EXPECT_EQ(scaler.get_scale(), 16.0);  // a clean step reset the count: held again
  EXPECT_EQ(scaler.skipped_steps(), 5);

  GradScaler giving_up(GradScalerOptions().init_scale(4).max_consecutive_skips(3));
  iteration(giving_up, opt, p, kNaN);
  iteration(giving_up, opt, p, kNaN);
  try {
    iteration(giving_up, opt, p, kNaN);
    FAIL() << "expected an error after 3 consecutive overflows";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("loss scale fell to 0.5 after 3 consecutive overflows"),
              std::string::npos)
        << e.what();
  }
}

// A static scale (update(new_scale), the train tool's --loss-scale=N) keeps the scale it is
// given, and still counts skipped steps and ends the run after max_consecutive_skips in a row.
TEST(GradScaler, StaticScaleCountsSkippedStepsAndGivesUp) {
  Problem p;
  SGD opt({p.w}, SGDOptions(0.01));
  GradScaler scaler(GradScalerOptions().init_scale(8).max_consecutive_skips(3));
  auto static_iteration = [&](double poison) {
    opt.zero_grad();
    scaler.scale(p.loss()).backward();
    if (poison != 0) Tensor(p.w.grad().narrow(0, 1, 1)).fill_(poison);
    const bool stepped = scaler.step(opt);
    scaler.update(8);
    return stepped;
  };
  EXPECT_FALSE(static_iteration(kInf));
  EXPECT_FALSE(static_iteration(kNaN));
  EXPECT_EQ(scaler.get_scale(), 8.0);
  EXPECT_EQ(scaler.skipped_steps(), 2);
  EXPECT_EQ(scaler.consecutive_overflows(), 2);
  EXPECT_TRUE(static_iteration(0));  // a clean step resets the run of overflows
  EXPECT_EQ(scaler.consecutive_overflows(), 0);
  EXPECT_EQ(scaler.skipped_steps(), 2);
  static_iteration(kInf);
  static_iteration(kInf);
  try {
    static_iteration(kInf);
    FAIL() << "expected an error after 3 consecutive overflows under a static scale";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("loss scale fell to 8 after 3 consecutive overflows"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(scaler.skipped_steps(), 5);
}

TEST(GradScaler, UnscaleThenClipSeesTrueGradients) {
  Problem ref;
  ref.loss().backward();
  const double true_norm = std::sqrt(sum(square(ref.w.grad())).item());
  const Tensor true_grad = ref.w.grad().clone();

  Problem p;
  SGD opt({p.w}, SGDOptions(1.0));
  GradScaler scaler(GradScalerOptions().init_scale(4096));
  scaler.scale(p.loss()).backward();
  scaler.unscale_(opt);
  const double norm = clip_grad_norm({p.w}, 0.5 * true_norm);
  EXPECT_NEAR(norm, true_norm, 1e-5 * true_norm);
  const Tensor start = p.w.data().clone();
  EXPECT_TRUE(scaler.step(opt));  // does not unscale a second time
  scaler.update();
  // p -= lr * clipped grad, the clipped grad being half the true one.
  const Tensor expected = sub(start, mul(true_grad, 0.5 * true_norm / (true_norm + 1e-6)));
  EXPECT_TRUE(allclose(p.w.data(), expected, 1e-5, 1e-6)) << max_abs_diff(p.w.data(), expected);
}

TEST(GradScaler, MisuseIsAnError) {
  Problem p;
  SGD opt({p.w}, SGDOptions(0.1));
  GradScaler scaler;
  EXPECT_THROW(scaler.update(), Error);  // no inf checks yet
  scaler.scale(p.loss()).backward();
  scaler.unscale_(opt);
  EXPECT_THROW(scaler.unscale_(opt), Error);  // twice per step, as PyTorch
  scaler.step(opt);
  EXPECT_THROW(scaler.unscale_(opt), Error);  // after step
  EXPECT_THROW(scaler.step(opt), Error);      // step twice
  scaler.update();
  scaler.scale(p.loss()).backward();
  scaler.unscale_(opt);  // a new iteration: allowed again
  EXPECT_THROW(GradScaler(GradScalerOptions().backoff_factor(1.5)), Error);
  EXPECT_THROW(GradScaler(GradScalerOptions().growth_factor(1.0)), Error);
  EXPECT_THROW(GradScaler(GradScalerOptions().init_scale(0)), Error);
}

TEST(GradScaler, InjectedReductionDecidesForEveryRank) {
  // A stand-in for the MAX all-reduce: another rank overflowed.
  int calls = 0;
  GradScaler scaler(GradScalerOptions().init_scale(32), [&calls](const Tensor& found_inf) {
    ++calls;
    Tensor(found_inf).fill_(1.0);
  });
  Problem p;
  SGD opt({p.w}, SGDOptions(0.1));
  const Tensor before = p.w.data().clone();
  EXPECT_FALSE(iteration(scaler, opt, p));  // clean here, skipped all the same
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(allclose(p.w.data(), before, 0, 0));
  EXPECT_EQ(scaler.get_scale(), 16.0);
  // A rank without any gradient still joins the reduction.
  opt.zero_grad();
  scaler.unscale_(opt);
  EXPECT_EQ(calls, 2);
}

// An optimizer whose step() reads gradients held outside its parameters (as ZeRO-2 reads its
// shard): the scaler must unscale and check those.
class ReadsElsewhere : public Optimizer {
 public:
  ReadsElsewhere(Variable param, Variable holder)
      : Optimizer(std::make_unique<SGDOptions>(0.1)), holder_(std::move(holder)) {
    add_param_group(ParamGroup({std::move(param)}));
  }
  void step() override { ++steps; }
  std::vector<Variable> gradient_variables() const override { return {holder_}; }
  StateDict state_dict() const override { return {}; }
  void load_state_dict(const StateDict&) override {}
  int64_t state_bytes() const override { return 0; }
  int steps = 0;

 private:
  Variable holder_;
};

TEST(GradScaler, UnscalesTheGradientsTheOptimizerSteps) {
  Variable param(ones({2}), true), holder(zeros({2}), true);
  ReadsElsewhere opt(param, holder);
  GradScaler scaler(GradScalerOptions().init_scale(4));
  param.set_grad(full({2}, 8.0));
  holder.set_grad(full({2}, 8.0));
  EXPECT_TRUE(scaler.step(opt));
  EXPECT_EQ(holder.grad().to_vector<float>(), (std::vector<float>{2, 2}));  // 8 / 4
  EXPECT_EQ(param.grad().to_vector<float>(), (std::vector<float>{8, 8}));   // not read: untouched
  scaler.update();
  Tensor(holder.grad()).fill_(kNaN);
  EXPECT_FALSE(scaler.step(opt));
  scaler.update();
  EXPECT_EQ(opt.steps, 1);
  EXPECT_EQ(scaler.get_scale(), 2.0);
}

TEST(GradScaler, DisabledIsTransparent) {
  Problem p;
  SGD opt({p.w}, SGDOptions(0.1));
  GradScaler scaler(GradScalerOptions().enabled(false));
  EXPECT_EQ(scaler.get_scale(), 1.0);
  const Variable loss = p.loss();
  EXPECT_TRUE(scaler.scale(loss).is_same(loss));
  loss.backward();
  Tensor(p.w.grad()).fill_(kInf);
  const Tensor before = p.w.data().clone();
  EXPECT_TRUE(scaler.step(opt));  // no checks: the optimizer steps
  scaler.update();
  EXPECT_FALSE(allclose(p.w.data(), before));
  EXPECT_TRUE(scaler.state_dict().empty());
}

TEST(GradScaler, StateDictRoundTripResumesExactly) {
  // 7 iterations straight, against 4, save, a fresh scaler loads, 3 more.
  const std::vector<double> poison = {0, kInf, 0, 0, 0, kNaN, 0};
  const auto make = [] {
    return GradScaler(GradScalerOptions().init_scale(1024).growth_interval(2).hysteresis(2));
  };
  Problem a;
  SGD opt_a({a.w}, SGDOptions(0.05));
  GradScaler straight = make();
  std::vector<double> scales;
  for (double x : poison) {
    iteration(straight, opt_a, a, x);
    scales.push_back(straight.get_scale());
  }

  Problem b;
  SGD opt_b({b.w}, SGDOptions(0.05));
  GradScaler first = make();
  for (size_t i = 0; i < 4; ++i) iteration(first, opt_b, b, poison[i]);
  const StateDict saved = first.state_dict();
  EXPECT_EQ(saved.at("scale").item(), first.get_scale());
  EXPECT_EQ(saved.at("growth_tracker").item(), static_cast<double>(first.growth_tracker()));
  GradScaler resumed(GradScalerOptions().init_scale(7));  // options come from the state
  resumed.load_state_dict(saved);
  EXPECT_EQ(resumed.get_scale(), first.get_scale());
  EXPECT_EQ(resumed.options().hysteresis(), 2);
  for (size_t i = 4; i < poison.size(); ++i) {
    iteration(resumed, opt_b, b, poison[i]);
    EXPECT_EQ(resumed.get_scale(), scales[i]) << i;
  }
  EXPECT_EQ(resumed.skipped_steps(), straight.skipped_steps());
  EXPECT_TRUE(allclose(a.w.data(), b.w.data(), 0, 0));
  EXPECT_THROW(resumed.load_state_dict(StateDict()), Error);
}

}  // namespace
}  // namespace optim
}  // namespace tessera
