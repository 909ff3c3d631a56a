// Pipe given a loss module (nn::CrossEntropyLoss, nn::MSELoss: objects called as loss(out, y),
// as in PyTorch) trains exactly as Pipe given the same loss written as a lambda: the same batch
// losses and, after 3 SGD steps, bitwise the same parameters on every stage. Label smoothing
// is on, so a module that dropped its options would differ.
#include <gtest/gtest.h>

#include "autograd/functions.h"
#include "dist/environment.h"
#include "nn/nn.h"
#include "optim/sgd.h"
#include "pipeline/pipe.h"
#include "tensor/ops.h"
#include "tests/pipeline/pipe_reference.h"

namespace tessera {
namespace pipeline {
namespace {

struct Trained {
  std::vector<double> losses;
  std::vector<Variable> parameters;
};

Trained train(LossFunction loss, const std::function<Tensor(const Batch&)>& target) {
  auto world = dist::world();
  Pipe pipe(deep_mlp(), world, std::move(loss), PipeOptions().microbatches(3));
  optim::SGD opt(pipe.parameters(), optim::SGDOptions(0.1).momentum(0.9));
  Trained run;
  for (int step = 0; step < 3; ++step) {
    const Batch b = make_batch(step, 10, {1, 8, 8});
    opt.zero_grad();
    run.losses.push_back(pipe.train_step(b.x, target(b)));
    opt.step();
  }
  run.parameters = pipe.parameters();
  return run;
}

void expect_same(const Trained& module, const Trained& lambda) {
  EXPECT_EQ(module.losses, lambda.losses);
  ASSERT_EQ(module.parameters.size(), lambda.parameters.size());
  for (size_t i = 0; i < module.parameters.size(); ++i) {
    EXPECT_EQ(max_abs_diff(module.parameters[i].data(), lambda.parameters[i].data()), 0) << i;
  }
}

Tensor classes(const Batch& b) { return b.y; }

TEST(Pipe, CrossEntropyLossModuleEqualsTheLambda) {
  const Trained module = train(nn::CrossEntropyLoss(Reduction::kMean, 0.1), classes);
  const Trained lambda = train([](const Variable& out, const Tensor& y) {
    return cross_entropy(out, y, Reduction::kMean, 0.1);
  }, classes);
  expect_same(module, lambda);
  const Trained unsmoothed = train(nn::CrossEntropyLoss(), classes);
  EXPECT_NE(module.losses[0], unsmoothed.losses[0]);  // the module's options are used
}

TEST(Pipe, MSELossModuleEqualsTheLambda) {
  // Regression onto the one-hot of the class: a float target, split by rows like the input.
  const auto one_hot = [](const Batch& b) {
    return eq(b.y.reshape({-1, 1}), arange(10, kI64).reshape({1, 10})).to(kF32);
  };
  const Trained module = train(nn::MSELoss(), one_hot);
  const Trained lambda = train([](const Variable& out, const Tensor& y) {
    return mse_loss(out, Variable(y));
  }, one_hot);
  expect_same(module, lambda);
}

}  // namespace
}  // namespace pipeline
}  // namespace tessera
