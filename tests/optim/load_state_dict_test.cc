// Optimizer::load_state_dict on state dicts of the wrong form: keys that are not
// "param_groups.G.NAME" / "state.I.NAME" with G and I in range, values that are not what the
// optimizer saved (a vector learning rate, a step count in floating point, integer moments).
// Each error names the key and what was expected, and leaves the optimizer as it was.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>

#include "optim/adam.h"
#include "optim/sgd.h"
#include "tensor/ops.h"
#include "tests/util/expect_error.h"

namespace tessera {
namespace optim {
namespace {

using tessera::testing::expect_error;

// The state of an Adam over two parameters after one step.
StateDict saved_adam() {
  Variable a(ones({2, 3}), true), b(ones({4}), true);
  Adam opt({a, b}, AdamOptions(0.01));
  a.set_grad(ones({2, 3}));
  b.set_grad(ones({4}));
  opt.step();
  return opt.state_dict();
}

// Loading `state` into a fresh two-parameter Adam must fail naming every one of `parts`.
void expect_load_error(const StateDict& state, const std::vector<std::string>& parts) {
  Variable a(zeros({2, 3}), true), b(zeros({4}), true);
  Adam opt({a, b}, AdamOptions(0.5));
  try {
    opt.load_state_dict(state);
    ADD_FAILURE() << "no error; expected one naming " << parts[0];
  } catch (const Error& e) {
    std::cout << e.message() << "\n";  // the log lists each case and its message
    for (const std::string& part : parts) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  }
  // Nothing was loaded: the options and (absent) state are the optimizer's own.
  EXPECT_EQ(opt.param_groups()[0].options->lr(), 0.5);
  EXPECT_FALSE(opt.state_dict().contains("state.0.step"));
}

StateDict with(StateDict s, const std::string& key, const Tensor& value) {
  s.set(key, value);
  return s;
}

StateDict renamed(StateDict s, const std::string& from, const std::string& to) {
  const Tensor t = s.at(from);
  s.erase(from);
  s.set(to, t);
  return s;
}

TEST(LoadStateDict, TheSavedStateLoads) {
  Variable a(zeros({2, 3}), true), b(zeros({4}), true);
  Adam opt({a, b}, AdamOptions(0.5));
  opt.load_state_dict(saved_adam());
  EXPECT_EQ(opt.param_groups()[0].options->lr(), 0.01);
  EXPECT_EQ(opt.state_dict().at("state.1.step").item(), 1);
}

TEST(LoadStateDict, KeysThatAreNotNumberedOrOutOfRange) {
  const StateDict s = saved_adam();
  // Used to throw a bare std::invalid_argument ("stoll").
  expect_load_error(renamed(s, "state.0.exp_avg", "state.x.exp_avg"),
                    {"'state.x.exp_avg'", "'state.I.NAME' with I a parameter index in [0, 2)"});
  // These used to be ignored silently (the state for parameter "01" is not parameter 1's).
  expect_load_error(renamed(s, "state.1.exp_avg", "state.01.exp_avg"), {"'state.01.exp_avg'"});
  expect_load_error(renamed(s, "state.1.exp_avg", "state.-1.exp_avg"), {"'state.-1.exp_avg'"});
  expect_load_error(with(s, "state.99999999999999999999.step", scalar_tensor(1, kI64)),
                    {"'state.99999999999999999999.step'"});
  expect_load_error(with(s, "state.0", zeros({2, 3})), {"'state.0'", "'state.I.NAME'"});
  expect_load_error(with(s, "state.0.", zeros({2, 3})), {"'state.0.'", "'state.I.NAME'"});
  expect_load_error(with(s, "state.2.step", scalar_tensor(1, kI64)),
                    {"'state.2.step'", "[0, 2)"});
  expect_load_error(with(s, "param_groups.x.lr", scalar_tensor(0.1, kF64)),
                    {"'param_groups.x.lr'",
                     "'param_groups.G.NAME' with G a group index in [0, 1)"});
  expect_load_error(with(s, "param_groups.1.lr", scalar_tensor(0.1, kF64)),
                    {"'param_groups.1.lr'", "[0, 1)"});
  expect_load_error(with(s, "param_groups.0.momentum", scalar_tensor(0.9, kF64)),
                    {"'param_groups.0.momentum'", "lr, beta1, beta2, eps, weight_decay, amsgrad"});
  expect_load_error(with(s, "lr", scalar_tensor(0.1, kF64)),
                    {"'lr'", "'param_groups.G.NAME' or 'state.I.NAME'"});
}

TEST(LoadStateDict, ValuesOfTheWrongForm) {
  const StateDict s = saved_adam();
  // A vector learning rate used to fail inside Tensor::item() without naming the key.
  expect_load_error(with(s, "param_groups.0.lr", from_vector<double>({0.1, 0.2}, {2})),
                    {"'param_groups.0.lr'", "one-element floating-point tensor", "[2]"});
  expect_load_error(with(s, "param_groups.0.lr", scalar_tensor(1, kI64)),
                    {"'param_groups.0.lr'", "one-element floating-point tensor", "i64"});
  expect_load_error(with(s, "param_groups.0.eps", scalar_tensor(INFINITY, kF64)),
                    {"'param_groups.0.eps'", "finite", "inf"});
  expect_load_error(with(s, "param_groups.0.lr", scalar_tensor(-1, kF64)),
                    {"'param_groups.0.lr' = -1", "invalid learning rate"});
  expect_load_error(with(s, "state.0.step", scalar_tensor(1, kF32)),
                    {"'state.0.step'", "one-element integer tensor", "f32"});
  expect_load_error(with(s, "state.0.step", from_vector<int64_t>({1, 1}, {2})),
                    {"'state.0.step'", "one-element integer tensor", "[2]"});
  expect_load_error(with(s, "state.0.step", scalar_tensor(-3, kI64)),
                    {"'state.0.step'", "-3"});
  // An f32 moment relabelled i32 (same bytes, same shape) used to load as garbage.
  expect_load_error(with(s, "state.1.exp_avg", zeros({4}, kI32)),
                    {"'state.1.exp_avg'", "floating-point", "i32"});
  expect_load_error(with(s, "state.1.exp_avg", zeros({2, 2})),
                    {"'state.1.exp_avg'", "[2, 2]", "[4]"});
  StateDict no_step = s;
  no_step.erase("state.1.step");
  expect_load_error(no_step, {"'state.1.exp_avg' is present but 'state.1.step' is not"});
}

TEST(LoadStateDict, SgdNamesItsOwnOptions) {
  Variable p(zeros({2}), true);
  SGD opt({p}, SGDOptions(0.1).momentum(0.9));
  StateDict s = opt.state_dict();
  s.set("param_groups.0.beta1", scalar_tensor(0.9, kF64));
  expect_error([&] { opt.load_state_dict(s); }, "'param_groups.0.beta1'");
}

}  // namespace
}  // namespace optim
}  // namespace tessera
