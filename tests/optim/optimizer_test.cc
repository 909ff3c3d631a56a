// SGD, Adam and AdamW against PyTorch's update rules written out here as scalar loops, over
// several steps; state_dict round trip; mixed-precision master weights; clip_grad_norm.
#include <gtest/gtest.h>

#include <cmath>

#include "optim/adam.h"
#include "optim/clip_grad.h"
#include "optim/sgd.h"
#include "tensor/fused_updates.h"
#include "tensor/ops.h"

namespace tessera {
namespace optim {
namespace {

// Gradients for step t: a fixed, non-trivial sequence.
std::vector<double> grad_at(int t, size_t n) {
  std::vector<double> g(n);
  for (size_t i = 0; i < n; ++i) g[i] = std::sin(1.3 * t + 0.7 * i) * (i + 1);
  return g;
}

// Runs `steps` steps of `opt` on one f64 parameter starting at p0, with grad_at(t).
template <typename Opt>
std::vector<double> run(Opt& opt, Variable& p, int steps) {
  for (int t = 1; t <= steps; ++t) {
    p.set_grad(from_vector<double>(grad_at(t, p.numel()), {p.numel()}));
    opt.step();
  }
  return p.data().to_vector<double>();
}

const std::vector<double> kStart = {0.5, -1.0, 2.0, 0.0};

TEST(SGD, MatchesTorchFormulaWithMomentumDampeningNesterovWeightDecay) {
  struct Case { double momentum, dampening, wd; bool nesterov; };
  for (const Case c : {Case{0, 0, 0, false}, Case{0.9, 0, 0, false}, Case{0.9, 0.1, 1e-2, false},
                       Case{0.8, 0, 5e-2, true}}) {
    Variable p(from_vector<double>(kStart, {4}), true);
    SGD opt({p}, SGDOptions(0.1).momentum(c.momentum).dampening(c.dampening)
                     .weight_decay(c.wd).nesterov(c.nesterov));
    const std::vector<double> got = run(opt, p, 5);
    // torch.optim.SGD, written out.
    std::vector<double> w = kStart, buf(4, 0);
    for (int t = 1; t <= 5; ++t) {
      const std::vector<double> g = grad_at(t, 4);
      for (int i = 0; i < 4; ++i) {
        double d = g[i] + c.wd * w[i];
        if (c.momentum != 0) {
          buf[i] = t == 1 ? d : c.momentum * buf[i] + (1 - c.dampening) * d;
          d = c.nesterov ? d + c.momentum * buf[i] : buf[i];
        }
        w[i] -= 0.1 * d;
      }
    }
    for (int i = 0; i < 4; ++i) EXPECT_NEAR(got[i], w[i], 1e-12) << "momentum " << c.momentum;
  }
}

void expect_adam(bool decoupled, double wd, bool amsgrad) {
  Variable p(from_vector<double>(kStart, {4}), true);
  const double lr = 0.01, b1 = 0.9, b2 = 0.99, eps = 1e-8;
  std::vector<double> got;
  if (decoupled) {
    AdamW opt({p}, AdamWOptions(lr));
    for (auto& g : opt.param_groups()) {
      static_cast<AdamOptions&>(*g.options).betas({b1, b2}).weight_decay(wd).amsgrad(amsgrad);
    }
    got = run(opt, p, 6);
  } else {
    Adam opt({p}, AdamOptions(lr).betas({b1, b2}).weight_decay(wd).amsgrad(amsgrad));
    got = run(opt, p, 6);
  }
  // torch.optim.Adam / AdamW, written out.
  std::vector<double> w = kStart, m(4, 0), v(4, 0), vmax(4, 0);
  for (int t = 1; t <= 6; ++t) {
    const std::vector<double> g0 = grad_at(t, 4);
    for (int i = 0; i < 4; ++i) {
      double g = g0[i];
      if (decoupled) {
        w[i] *= 1 - lr * wd;
      } else {
        g += wd * w[i];
      }
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      double vhat = v[i];
      if (amsgrad) {
        vmax[i] = std::max(vmax[i], v[i]);
        vhat = vmax[i];
      }
      const double denom = std::sqrt(vhat) / std::sqrt(1 - std::pow(b2, t)) + eps;
      w[i] -= lr / (1 - std::pow(b1, t)) * m[i] / denom;
    }
  }
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(got[i], w[i], 1e-12) << "element " << i;
}

TEST(Adam, MatchesTorchFormula) { expect_adam(false, 0, false); }
TEST(Adam, WeightDecayAndAmsgrad) { expect_adam(false, 0.1, true); }
TEST(AdamW, DecoupledWeightDecay) { expect_adam(true, 0.1, false); }
TEST(AdamW, DecoupledWeightDecayWithAmsgrad) { expect_adam(true, 0.05, true); }

TEST(Optimizer, SkipsParametersWithoutGradAndZeroGrad) {
  Variable a(ones({2}, kF64), true), b(ones({2}, kF64), true);
  SGD opt({a, b}, SGDOptions(1.0));
  a.set_grad(ones({2}, kF64));
  opt.step();
  EXPECT_EQ(a.data().to_vector<double>(), (std::vector<double>{0, 0}));
  EXPECT_EQ(b.data().to_vector<double>(), (std::vector<double>{1, 1}));
  opt.zero_grad();
  EXPECT_FALSE(a.grad().defined());
}

// Steps first..last of Adam on p with gradients grad_at(t).
void adam_steps(Optimizer& opt, Variable& p, int first, int last) {
  for (int t = first; t <= last; ++t) {
    p.set_grad(from_vector<double>(grad_at(t, p.numel()), {p.numel()}));
    opt.step();
  }
}

TEST(Optimizer, StateDictRoundTripResumesExactly) {
  // Five steps straight through...
  Variable straight(from_vector<double>(kStart, {4}), true);
  Adam a({straight}, AdamOptions(0.01).amsgrad(true));
  adam_steps(a, straight, 1, 5);
  // ...equal three steps, a save, a fresh optimizer (other lr) loading it, two more steps.
  Variable p(from_vector<double>(kStart, {4}), true);
  Adam b({p}, AdamOptions(0.01).amsgrad(true));
  adam_steps(b, p, 1, 3);
  const StateDict saved = b.state_dict();
  EXPECT_EQ(saved.at("state.0.step").item(), 3);
  EXPECT_TRUE(saved.contains("state.0.exp_avg"));
  EXPECT_TRUE(saved.contains("state.0.max_exp_avg_sq"));
  EXPECT_EQ(saved.at("param_groups.0.lr").item(), 0.01);
  Variable q(p.data().clone(), true);
  Adam c({q}, AdamOptions(0.5));
  c.load_state_dict(saved);
  EXPECT_EQ(c.param_groups()[0].options->lr(), 0.01);
  adam_steps(c, q, 4, 5);
  EXPECT_EQ(q.data().to_vector<double>(), straight.data().to_vector<double>());  // bitwise
  // Loaded state is a copy: stepping c did not touch b's.
  EXPECT_EQ(b.state_dict().at("state.0.step").item(), 3);

  Variable wrong(ones({3}, kF64), true);
  Adam mismatched({wrong}, AdamOptions());
  EXPECT_THROW(mismatched.load_state_dict(saved), Error);
}

TEST(Optimizer, StateBytesCountsMomentsAndMasterCopies) {
  Variable p(zeros({1000}), true);
  Adam adam({p}, AdamOptions());
  p.set_grad(ones({1000}));
  adam.step();
  EXPECT_EQ(adam.state_bytes(), 2 * 4000);  // exp_avg + exp_avg_sq in f32
  Variable h(zeros({1000}, kBF16), true);
  Adam mixed({h}, AdamOptions());
  h.set_grad(ones({1000}, kBF16));
  mixed.step();
  EXPECT_EQ(mixed.state_bytes(), 3 * 4000);  // + the f32 master copy: K = 12 bytes/param
}

TEST(Optimizer, MasterWeightsKeepSmallUpdatesThatBf16WouldLose) {
  // 1 + 1e-3 rounds back to 1 in bf16, but 100 such steps on the f32 master add up.
  Variable p(ones({1}, kBF16), true);
  SGD opt({p}, SGDOptions(1e-3));
  for (int i = 0; i < 100; ++i) {
    p.set_grad(full({1}, -1.0, kBF16));
    opt.step();
  }
  EXPECT_NEAR(p.data().item(), 1.1, 0.01);
}

TEST(Optimizer, OptionErrorsNameTheValues) {
  Variable p(ones({1}), true);
  EXPECT_THROW(SGD({p}, SGDOptions(-1)), Error);
  EXPECT_THROW(SGD({p}, SGDOptions(0.1).nesterov(true)), Error);
  EXPECT_THROW(Adam({p}, AdamOptions().betas({1.0, 0.9})), Error);
  EXPECT_THROW(SGD({p, p}, SGDOptions(0.1)), Error);  // a parameter listed twice
}

// The multi-tensor front end: the same as one update per tensor, and one dtype per call.
TEST(FusedUpdates, ManyEqualsOneByOneAndRejectsMixedDtypes) {
  Generator gen(5);
  std::vector<AdamTensors> many;
  std::vector<AdamTensors> single;
  for (int64_t n : {3, 10, 1}) {
    const Tensor p = randn({n}, kF64, &gen), g = randn({n}, kF64, &gen);
    many.push_back({p.clone(), g, zeros({n}, kF64), zeros({n}, kF64), Tensor()});
    single.push_back({p.clone(), g, zeros({n}, kF64), zeros({n}, kF64), Tensor()});
  }
  AdamUpdate u;
  u.lr = 0.1;
  adam_update_many_(many, u);
  for (const AdamTensors& t : single) {
    adam_update_(t.param, t.grad, t.exp_avg, t.exp_avg_sq, t.max_exp_avg_sq, u);
  }
  for (size_t i = 0; i < many.size(); ++i) {
    EXPECT_EQ(many[i].param.to_vector<double>(), single[i].param.to_vector<double>());
  }
  std::vector<SgdTensors> mixed = {{zeros({2}), zeros({2}), Tensor()},
                                   {zeros({2}, kF64), zeros({2}, kF64), Tensor()}};
  SgdUpdate s;
  s.lr = 0.1;
  try {
    sgd_update_many_(mixed, s);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("first one's dtype and device"), std::string::npos)
        << e.what();
  }
}

TEST(ClipGradNorm, ScalesToMaxNorm) {
  Variable a(zeros({2}, kF64), true), b(zeros({1}, kF64), true);
  a.set_grad(from_vector<double>({3, 0}, {2}));
  b.set_grad(from_vector<double>({4}, {1}));
  const double total = clip_grad_norm({a, b}, 1.0);
  EXPECT_NEAR(total, 5.0, 1e-12);
  EXPECT_NEAR(a.grad().at({0}), 3.0 / (5 + 1e-6), 1e-9);
  EXPECT_NEAR(b.grad().at({0}), 4.0 / (5 + 1e-6), 1e-9);
  EXPECT_NEAR(clip_grad_norm({a, b}, 10.0), 1.0, 1e-5);  // under the limit: unchanged
  EXPECT_NEAR(a.grad().at({0}), 3.0 / (5 + 1e-6), 1e-9);
}

TEST(Optimizer, AnEmptyParameterListIsAnError) {
  try {
    SGD opt(std::vector<Variable>{}, SGDOptions(0.1));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("empty parameter list"), std::string::npos) << what;
    EXPECT_NE(what.find("register_module"), std::string::npos) << what;
  }
  EXPECT_THROW(Adam(std::vector<ParamGroup>{ParamGroup({})}, AdamOptions()), Error);
}

}  // namespace
}  // namespace optim
}  // namespace tessera
