// What the local SGD and DiLoCo tests share: a small f64 model with BatchNorm (so buffers are
// averaged too), each rank's batches, and the one-process simulation of the whole protocol:
// N replicas in one process, warm-up steps taking the mean gradient (DDP), then local steps on
// each replica's own batches, and at each round's end either the replicas' mean (local SGD) or
// DiLoCo's outer step on a global copy, written out here from the papers' formulas.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "autograd/functions.h"
#include "dist/local_sgd/diloco.h"
#include "dist/local_sgd/model_averager.h"
#include "nn/nn.h"
#include "optim/optimizer.h"
#include "tensor/ops.h"
#include "tensor/random.h"

namespace tessera {
namespace dist {
namespace local_sgd_test {

constexpr int64_t kPerRank = 4, kChannels = 2, kClasses = 5;

// BatchNorm (f64 running statistics, an i64 counter), then an MLP; f64 so that the comparisons
// can be tight. Every call builds the same initial model.
inline std::shared_ptr<nn::Sequential> model() {
  manual_seed(13);
  auto m = std::make_shared<nn::Sequential>();
  m->push_back("bn", std::make_shared<nn::BatchNorm2d>(kChannels));
  m->push_back("flatten", std::make_shared<nn::Flatten>());
  m->push_back("fc1", std::make_shared<nn::Linear>(kChannels * 4, 16));
  m->push_back("relu", std::make_shared<nn::ReLU>());
  m->push_back("fc2", std::make_shared<nn::Linear>(16, kClasses));
  m->to(kF64);
  return m;
}

// Rank r's batch at optimizer step `step` (its own data: different on every rank and step).
inline std::pair<Tensor, Tensor> batch(int step, int rank) {
  Generator g(1000 * step + rank);
  const Tensor x = randn({kPerRank, kChannels, 2, 2}, kF64, &g);
  return {x, argmax(x.reshape({kPerRank, kChannels * 4}).narrow(1, 0, kClasses), 1)};
}

inline Variable loss_of(nn::Module& net, int step, int rank) {
  const auto [x, y] = batch(step, rank);
  return cross_entropy(net.forward(Variable(x)), y);
}

using MakeOptimizer = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Variable>)>;

struct Protocol {
  int64_t period = 1, warmup = 0;
  bool diloco = false;
  OuterOptimizerFactory outer;  // DiLoCo's
};

struct Simulation {
  std::vector<std::shared_ptr<nn::Sequential>> replicas;  // replica r is rank r's model
  std::vector<Variable> global;                           // DiLoCo's global model
};

// The mean over replicas as the all-reduce computes it: the sum, then times 1/N.
inline Tensor mean_of(const std::vector<Tensor>& per_replica) {
  Tensor total = per_replica[0].clone();
  for (size_t r = 1; r < per_replica.size(); ++r) total = add(total, per_replica[r]);
  return mul(total, 1.0 / per_replica.size());
}

inline Simulation simulate(int world, int steps, const Protocol& p, const MakeOptimizer& inner) {
  Simulation s;
  std::vector<std::unique_ptr<optim::Optimizer>> opts;
  for (int r = 0; r < world; ++r) {
    s.replicas.push_back(model());
    opts.push_back(inner(s.replicas[r]->parameters()));
  }
  const size_t P = s.replicas[0]->parameters().size();
  auto param = [&](int r, size_t i) { return s.replicas[r]->parameters()[i]; };
  std::unique_ptr<optim::Optimizer> outer;
  if (p.diloco) {
    for (size_t i = 0; i < P; ++i) s.global.push_back(Variable(param(0, i).data().clone(), true));
    outer = p.outer(s.global);
  }
  for (int k = 0; k < steps; ++k) {
    for (int r = 0; r < world; ++r) {
      opts[r]->zero_grad();
      loss_of(*s.replicas[r], k, r).backward();
    }
    if (k < p.warmup) {
      // DDP: every replica steps with the mean gradient.
      for (size_t i = 0; i < P; ++i) {
        std::vector<Tensor> grads;
        for (int r = 0; r < world; ++r) grads.push_back(param(r, i).grad());
        const Tensor mean = mean_of(grads);
        for (int r = 0; r < world; ++r) param(r, i).set_grad(mean.clone());
      }
    }
    for (int r = 0; r < world; ++r) opts[r]->step();
    if (p.diloco && k + 1 == p.warmup) {
      for (size_t i = 0; i < P; ++i) Tensor(s.global[i].data()).copy_(param(0, i).data());
    }
    if (!communicates_after(k, p.period, p.warmup)) continue;
    // Floating-point buffers: averaged in both algorithms.
    const size_t B = s.replicas[0]->buffers().size();
    for (size_t j = 0; j < B; ++j) {
      if (!is_floating(s.replicas[0]->buffers()[j].dtype())) continue;
      std::vector<Tensor> values;
      for (int r = 0; r < world; ++r) values.push_back(s.replicas[r]->buffers()[j].data());
      const Tensor mean = mean_of(values);
      for (int r = 0; r < world; ++r) Tensor(s.replicas[r]->buffers()[j].data()).copy_(mean);
    }
    for (size_t i = 0; i < P; ++i) {
      std::vector<Tensor> values;
      for (int r = 0; r < world; ++r) {
        // Local SGD: the replicas' parameters. DiLoCo: their pseudo-gradients theta - theta_r.
        values.push_back(p.diloco ? sub(s.global[i].data(), param(r, i).data())
                                  : param(r, i).data());
      }
      const Tensor mean = mean_of(values);
      if (p.diloco) {
        s.global[i].set_grad(mean);
      } else {
        for (int r = 0; r < world; ++r) Tensor(param(r, i).data()).copy_(mean);
      }
    }
    if (p.diloco) {
      outer->step();
      outer->zero_grad();
      for (size_t i = 0; i < P; ++i) {
        for (int r = 0; r < world; ++r) Tensor(param(r, i).data()).copy_(s.global[i].data());
      }
    }
  }
  return s;
}

// The largest difference between two models' parameters and floating-point buffers.
inline double largest_difference(nn::Module& a, nn::Module& b, bool buffers = true) {
  double worst = 0;
  const auto pa = a.parameters(), pb = b.parameters();
  for (size_t i = 0; i < pa.size(); ++i) {
    worst = std::max(worst, max_abs_diff(pa[i].data(), pb[i].data()));
  }
  if (buffers) {
    const auto ba = a.buffers(), bb = b.buffers();
    for (size_t i = 0; i < ba.size(); ++i) {
      worst = std::max(worst, max_abs_diff(ba[i].data().to(kF64), bb[i].data().to(kF64)));
    }
  }
  return worst;
}

// What rank `rank` sends in the ring all-reduce of n elements of `element_size` bytes: every
// chunk but its own in the reduce-scatter, every chunk but its right neighbour's in the
// all-gather (dist/process_group_mpi.cc).
inline int64_t ring_all_reduce_bytes(int64_t n, int64_t element_size, int rank, int world) {
  if (world == 1) return 0;
  const std::vector<int64_t> c = balanced_counts(n, world);
  return element_size * (2 * n - c[rank] - c[(rank + 1) % world]);
}

}  // namespace local_sgd_test
}  // namespace dist
}  // namespace tessera
