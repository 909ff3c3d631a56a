// The consensus distance Xi^2 = 1/N sum_i ||w_i - w_bar||^2 on 2 and 3 ranks: on known per-rank
// vectors against the closed form; unchanged inputs; the value the averagers measure before
// averaging equals it, and after averaging the replicas agree exactly (Xi^2 = 0).
#include "dist/local_sgd/consensus_distance.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <memory>

#include "dist/environment.h"
#include "dist/local_sgd/diloco.h"
#include "dist/local_sgd/periodic_model_averager.h"
#include "optim/sgd.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {
namespace {

// Rank r holds w_r = (r v, (1 - r) u) with v = [1, 2, 3] (f32) and u = [[1], [1]]... here
// u = [0.5, -0.5] (f64): w_r - w_bar = (r - rbar) (v, -u), so
//   Xi^2 = (||v||^2 + ||u||^2) * 1/N sum_r (r - rbar)^2 = (14 + 0.5) (N^2 - 1) / 12
// (the variance of 0, 1, ..., N-1): 3.625 on 2 ranks, 9.6667 on 3.
std::vector<Variable> known_vectors(int r) {
  return {Variable(mul(from_vector<float>({1, 2, 3}, {3}), static_cast<double>(r)), true),
          Variable(mul(from_vector<double>({0.5, -0.5}, {2, 1}), 1.0 - r), true)};
}

double closed_form(int N) { return 14.5 * (N * N - 1) / 12.0; }

TEST(ConsensusDistance, EqualsTheClosedFormOnKnownVectors) {
  auto world = dist::world();
  const int N = world->size(), r = world->rank();
  const std::vector<Variable> w = known_vectors(r);
  const std::vector<Tensor> tensors = {w[0].data(), w[1].data()};
  const Tensor before0 = tensors[0].clone(), before1 = tensors[1].clone();
  const double xi2 = consensus_distance(tensors, *world);
  if (r == 0) {
    std::printf("consensus distance on %d ranks: %.17g, closed form %.17g\n", N, xi2,
                closed_form(N));
  }
  EXPECT_NEAR(xi2, closed_form(N), 1e-12);
  EXPECT_EQ(max_abs_diff(before0, tensors[0]), 0);
  EXPECT_EQ(max_abs_diff(before1, tensors[1]), 0);
  // Identical replicas whose mean the all-reduce computes exactly (ones, 3.0): 0.
  const std::vector<Tensor> same = {ones({4}), full({2}, 3.0, kF64)};
  EXPECT_EQ(consensus_distance(same, *world), 0.0);
}

TEST(ConsensusDistance, TheAveragerMeasuresItBeforeAveraging) {
  auto world = dist::world();
  const int N = world->size(), r = world->rank();
  const std::vector<Variable> w = known_vectors(r);
  PeriodicModelAverager averager(world,
                                 PeriodicModelAveragerOptions(1).measure_consensus_distance(true));
  EXPECT_TRUE(std::isnan(averager.consensus_distance()));
  EXPECT_TRUE(averager.average(w));
  EXPECT_NEAR(averager.consensus_distance(), closed_form(N), 1e-12);
  // Averaged: every rank holds the same bits.
  EXPECT_EQ(consensus_distance({w[0].data(), w[1].data()}, *world), 0.0);
  EXPECT_NEAR(w[0].data().at({2}), 3.0 * (N - 1) / 2.0, 1e-6);
}

TEST(ConsensusDistance, DiLoCoMeasuresItFromThePseudoGradients) {
  // w_i - w_bar = Delta - Delta_i: the same Xi^2 from the pseudo-gradients.
  auto world = dist::world();
  const int N = world->size(), r = world->rank();
  const std::vector<Variable> w = known_vectors(0);  // rank 0's values everywhere at the start
  DiLoCo diloco(w, {}, world,
                [](std::vector<Variable> g) -> std::unique_ptr<optim::Optimizer> {
                  return std::make_unique<optim::SGD>(std::move(g), optim::SGDOptions(1.0));
                },
                DiLoCoOptions(1).measure_consensus_distance(true));
  // One "inner step" that moves rank r to the known vectors.
  const std::vector<Variable> target = known_vectors(r);
  for (size_t i = 0; i < w.size(); ++i) Tensor(w[i].data()).copy_(target[i].data());
  EXPECT_TRUE(diloco.average(w));
  EXPECT_NEAR(diloco.consensus_distance(), closed_form(N), 1e-12);
  // Outer SGD with lr 1: the replicas' mean, r v -> (N - 1) / 2 v.
  EXPECT_NEAR(w[0].data().at({2}), 3.0 * (N - 1) / 2.0, 1e-6);
}

TEST(ConsensusDistance, SquaredDistanceChecksItsLists) {
  EXPECT_EQ(squared_distance({ones({2})}, {zeros({2})}), 2.0);
  try {
    squared_distance({ones({2})}, {zeros({3})});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 0 has shape [2] against [3]"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace dist
}  // namespace tessera
