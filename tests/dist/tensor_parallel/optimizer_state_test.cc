// A tensor-parallel model's optimizer state in the unsplit model's format: after two Adam steps
// of the Megatron MLP on 2 or 3 ranks, the gathered state equals a single-process Adam's (f64,
// 1e-10), and the single-process state sliced into a fresh tensor-parallel optimizer continues
// exactly as the single process does.
#include "dist/tensor_parallel/optimizer_state.h"

#include <gtest/gtest.h>

#include "autograd/functions.h"
#include "dist/environment.h"
#include "dist/tensor_parallel/parallelize.h"
#include "models/simple.h"
#include "optim/adam.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {
namespace tensor_parallel {
namespace {

std::shared_ptr<nn::Sequential> mlp(bool parallel) {
  manual_seed(31);
  auto m = models::MLP(6, 7, 5);
  m->to(kF64);
  if (parallel) {
    parallelize_module(*m, dist::world(),
                       {{"fc1", Style::kColumnwise}, {"fc2", Style::kRowwise}});
  }
  return m;
}

void step(nn::Module& model, optim::Optimizer& opt, int i) {
  Generator g(70 + i);
  const Tensor x = randn({4, 6}, kF64, &g);
  const Tensor y = from_vector<int64_t>({0, 1, 2, 3}, {4});
  opt.zero_grad();
  cross_entropy(model.forward(Variable(x)), y).backward();
  opt.step();
}

void expect_same(const StateDict& a, const StateDict& b, double tol) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : b) {
    ASSERT_TRUE(a.contains(name)) << name;
    ASSERT_EQ(a.at(name).shape(), t.shape()) << name;
    EXPECT_LT(max_abs_diff(a.at(name).to(kF64), t.to(kF64)), tol) << name;
  }
}

TEST(TensorParallelOptimizerState, GathersToTheUnsplitStateAndSlicesBack) {
  auto reference = mlp(false), model = mlp(true);
  optim::Adam ref_opt(reference->parameters(), optim::AdamOptions(0.01));
  optim::Adam opt(model->parameters(), optim::AdamOptions(0.01));
  for (int i = 0; i < 2; ++i) {
    step(*reference, ref_opt, i);
    step(*model, opt, i);
  }
  const StateDict ref_state = ref_opt.state_dict();
  expect_same(gather_optimizer_state(opt.state_dict(), *model), ref_state, 1e-10);

  // A fresh tensor-parallel model and optimizer take the single process's model and state.
  auto resumed = mlp(true);
  resumed->load_state_dict(reference->state_dict());
  optim::Adam resumed_opt(resumed->parameters(), optim::AdamOptions(0.01));
  resumed_opt.load_state_dict(slice_optimizer_state(ref_state, *resumed));
  step(*reference, ref_opt, 2);
  step(*resumed, resumed_opt, 2);
  expect_same(resumed->state_dict(), reference->state_dict(), 1e-10);
}

}  // namespace
}  // namespace tensor_parallel
}  // namespace dist
}  // namespace tessera
