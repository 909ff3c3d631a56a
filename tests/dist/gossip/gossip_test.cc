// D-PSGD on 2, 3 and 4 ranks against a one-process simulation written here: N models, each
// computing its gradient at its own parameters on its own batch, then
// w_i <- sum_j W_ij w_j - lr g_i. Equal after 4 steps (f64), for the ring and the exponential
// graph; the point-to-point bytes per step are the out-degree times the parameters' bytes.
#include "dist/gossip/gossip.h"

#include <gtest/gtest.h>

#include <vector>

#include "autograd/functions.h"
#include "dist/environment.h"
#include "models/simple.h"
#include "optim/sgd.h"
#include "tensor/ops.h"
#include "tensor/random.h"

namespace tessera {
namespace dist {
namespace {

constexpr double kLr = 0.1;
constexpr int kSteps = 4;

std::shared_ptr<nn::Sequential> mlp() {
  manual_seed(41);
  auto m = models::MLP(10, 8, 3);
  m->to(kF64);
  return m;
}

std::pair<Tensor, Tensor> rank_batch(int step, int rank) {
  Generator g(31 * step + rank);
  const Tensor x = randn({4, 10}, kF64, &g);
  return {x, argmax(x.narrow(1, 0, 3), 1)};
}

std::vector<Tensor> flat_parameters(nn::Module& m) {
  std::vector<Tensor> out;
  for (const Variable& p : m.parameters()) out.push_back(p.data().clone());
  return out;
}

void matches_simulation(const MixingMatrix& w) {
  auto world = dist::world();
  const int n = world->size(), me = world->rank();
  // Every rank starts from the same model (the same seed); then they drift apart.
  auto model = mlp();
  GossipAverager gossip(model->parameters(), world, w);
  optim::SGD opt(model->parameters(), optim::SGDOptions(kLr));
  int64_t bytes = 0;
  for (int step = 0; step < kSteps; ++step) {
    const auto [x, y] = rank_batch(step, me);
    opt.zero_grad();
    world->ledger().reset();
    gossip.launch();
    cross_entropy(model->forward(Variable(x)), y).backward();
    gossip.finish();
    opt.step();
    bytes = world->ledger().entry(CollectiveKind::kSendRecv).bytes;
  }
  // The simulation.
  std::vector<std::shared_ptr<nn::Sequential>> sim;
  for (int r = 0; r < n; ++r) sim.push_back(mlp());
  for (int step = 0; step < kSteps; ++step) {
    std::vector<std::vector<Tensor>> params(n), grads(n);
    for (int r = 0; r < n; ++r) {
      const auto [x, y] = rank_batch(step, r);
      sim[r]->zero_grad();
      cross_entropy(sim[r]->forward(Variable(x)), y).backward();
      params[r] = flat_parameters(*sim[r]);
      for (const Variable& p : sim[r]->parameters()) grads[r].push_back(p.grad().clone());
    }
    for (int i = 0; i < n; ++i) {
      const std::vector<Variable> ps = sim[i]->parameters();
      for (size_t k = 0; k < ps.size(); ++k) {
        Tensor mixed = zeros_like(params[i][k]);
        for (int j = 0; j < n; ++j) mixed = add(mixed, mul(params[j][k], w.weight(i, j)));
        Tensor(ps[k].data()).copy_(sub(mixed, mul(grads[i][k], kLr)));
      }
    }
  }
  const std::vector<Variable> mine = model->parameters(), theirs = sim[me]->parameters();
  for (size_t k = 0; k < mine.size(); ++k) {
    EXPECT_LT(max_abs_diff(mine[k].data(), theirs[k].data()), 1e-12) << w.name() << " parameter " << k;
  }
  int64_t psi = 0;
  for (const Variable& p : mine) psi += p.numel();
  EXPECT_EQ(bytes, static_cast<int64_t>(w.out_neighbours(me).size()) * psi * 8) << w.name();
  EXPECT_EQ(gossip.elements_sent_per_step(), static_cast<int64_t>(w.out_neighbours(me).size()) * psi);
  // The models differ between ranks (decentralized), unless there is only one.
  Tensor first = mine[0].data().clone();
  world->broadcast(first, 0)->wait();
  if (me != 0) {
    EXPECT_GT(max_abs_diff(first, mine[0].data()), 0) << w.name();
  }
}

TEST(Gossip, RingDpsgdEqualsTheOneProcessSimulation) {
  matches_simulation(MixingMatrix::ring(dist::world()->size()));
}

TEST(Gossip, ExponentialGraphDpsgdEqualsTheOneProcessSimulation) {
  matches_simulation(MixingMatrix::exponential(dist::world()->size()));
}

// Learning rate 0: gossip alone is repeated multiplication by W. Each rank starts from its own
// vector x_r; after t exchanges rank i holds (W^t x)_i, computed here in one process; the mean is
// preserved (W is doubly stochastic) and the spread shrinks like lambda_2^t.
TEST(Gossip, WithoutGradientsItIsRepeatedMultiplicationByTheMixingMatrix) {
  auto world = dist::world();
  const int n = world->size(), me = world->rank();
  for (const MixingMatrix& w : {MixingMatrix::ring(n), MixingMatrix::exponential(n)}) {
    auto start = [](int r) { return from_vector<double>({1.0 * r, r * r - 2.0, 5.0 - r}, {3}); };
    Variable x(start(me).clone(), true);
    GossipAverager gossip({x}, world, w);
    std::vector<Tensor> sim;
    for (int r = 0; r < n; ++r) sim.push_back(start(r));
    double first_spread = -1, spread = 0;
    for (int t = 0; t < 12; ++t) {
      gossip.launch();
      gossip.finish();
      std::vector<Tensor> next;
      for (int i = 0; i < n; ++i) {
        Tensor v = zeros({3}, kF64);
        for (int j = 0; j < n; ++j) v = add(v, mul(sim[j], w.weight(i, j)));
        next.push_back(v);
      }
      sim = next;
      EXPECT_LT(max_abs_diff(x.data(), sim[me]), 1e-12) << w.name() << " step " << t;
      Tensor mean = zeros({3}, kF64);
      for (const Tensor& v : sim) mean = add(mean, div(v, static_cast<double>(n)));
      spread = 0;
      for (const Tensor& v : sim) spread += sum(square(sub(v, mean))).item();
      if (first_spread < 0) first_spread = spread;
      // The mean never moves: (1/n) sum_r x_r.
      Tensor expected_mean = zeros({3}, kF64);
      for (int r = 0; r < n; ++r) expected_mean = add(expected_mean, div(start(r), static_cast<double>(n)));
      EXPECT_LT(max_abs_diff(mean, expected_mean), 1e-12) << w.name();
    }
    // The replicas converge to their mean (on 2 ranks the exponential graph averages in one step).
    EXPECT_LT(spread, 1e-3 * first_spread + 1e-20) << w.name() << " n " << n;
  }
}

TEST(Gossip, AMatrixOfAnotherSizeIsAnError) {
  auto world = dist::world();
  auto model = mlp();
  try {
    GossipAverager g(model->parameters(), world, MixingMatrix::ring(world->size() + 1));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mixing matrix of " + std::to_string(world->size() + 1) +
                                         " ranks for a group of " + std::to_string(world->size())),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace dist
}  // namespace tessera
