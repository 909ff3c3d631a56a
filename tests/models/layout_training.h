// What the activation-layout training tests share (channels_last_training_test.cc,
// channels_blocked_training_test.cc): a few SGD steps of a model on seeded batches, giving the
// losses, the last step's gradients and the stem's output (whose layout says how the network
// ran).
#pragma once

#include <cmath>
#include <optional>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "nn/nn.h"
#include "optim/sgd.h"
#include "tensor/ops.h"

namespace tessera {

struct TrainingRun {
  std::vector<double> losses;
  std::vector<Tensor> grads;  // the last step's, per parameter, in f64
  Tensor stem_output;         // the first child's output in the last step's forward
};

// `steps` steps of SGD (lr 0.01, `momentum`) on batches of 4 images of [in_channels, size,
// size] drawn from seeds 100, 101, ..., with fixed labels; forward and loss under autocast to
// `amp` when given.
inline TrainingRun train_steps(nn::Sequential& model, int steps, int64_t size,
                               int64_t in_channels = 3, double momentum = 0,
                               std::optional<DType> amp = std::nullopt) {
  optim::SGD opt(model.parameters(), optim::SGDOptions(0.01).momentum(momentum));
  TrainingRun run;
  nn::Module& stem = *model.children().front();
  const int hook = stem.register_forward_hook([&run](nn::Module&, const Variable& out) {
    run.stem_output = out.data();
    return out;
  });
  for (int step = 0; step < steps; ++step) {
    Generator g(100 + step);
    const Tensor x = randn({4, in_channels, size, size}, kF32, &g);
    const Tensor y = from_vector<int64_t>({step, step + 3, step + 5, 9 - step}, {4});
    opt.zero_grad();
    Variable loss;
    {
      std::optional<AutocastGuard> autocast;
      if (amp) autocast.emplace(*amp);
      loss = cross_entropy(model(Variable(x)), y);
    }
    loss.backward();
    run.losses.push_back(loss.data().item());
    if (step + 1 == steps) {
      for (const Variable& p : model.parameters()) run.grads.push_back(p.grad().to(kF64));
    }
    opt.step();
  }
  stem.remove_forward_hook(hook);
  return run;
}

inline double norm(const Tensor& t) { return std::sqrt(sum(mul(t, t)).item()); }

}  // namespace tessera
