// The mixing matrices on their own: doubly stochastic, the ring's weights written out (on 2
// ranks the neighbour counted twice), the exponential graph's neighbours, and the second
// largest eigenvalue against the ring's closed form and against power iteration on W - J/n.
#include "dist/gossip/mixing_matrix.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <vector>

namespace tessera {
namespace dist {
namespace {

void expect_doubly_stochastic(const MixingMatrix& w) {
  for (int i = 0; i < w.size(); ++i) {
    double row = 0, col = 0;
    for (int j = 0; j < w.size(); ++j) {
      row += w.weight(i, j);
      col += w.weight(j, i);
      EXPECT_GE(w.weight(i, j), 0);
    }
    EXPECT_NEAR(row, 1, 1e-12) << w.name() << " n " << w.size() << " row " << i;
    EXPECT_NEAR(col, 1, 1e-12) << w.name() << " n " << w.size() << " column " << i;
  }
}

// |lambda_2| by power iteration: W applied to a vector with its mean removed, many times; the
// growth per step tends to the largest magnitude among the other eigenvalues.
double power_iteration_rate(const MixingMatrix& w) {
  const int n = w.size();
  std::vector<double> v(n), next(n);
  for (int i = 0; i < n; ++i) v[i] = std::sin(1.0 + 3.7 * i);
  double rate = 0;
  for (int t = 0; t < 4000; ++t) {
    double mean = 0;
    for (double x : v) mean += x / n;
    double norm = 0;
    for (int i = 0; i < n; ++i) {
      next[i] = 0;
      for (int j = 0; j < n; ++j) next[i] += w.weight(i, j) * (v[j] - mean);
      norm += next[i] * next[i];
    }
    norm = std::sqrt(norm);
    double before = 0;
    for (int i = 0; i < n; ++i) before += (v[i] - mean) * (v[i] - mean);
    rate = norm / std::sqrt(before);
    for (int i = 0; i < n; ++i) v[i] = next[i] / norm;
  }
  return rate;
}

TEST(MixingMatrix, RingIsTheLecturesThirdsAndCountsATwoRankNeighbourTwice) {
  for (int n : {1, 2, 3, 5, 8}) expect_doubly_stochastic(MixingMatrix::ring(n));
  const MixingMatrix one = MixingMatrix::ring(1);
  EXPECT_DOUBLE_EQ(one.weight(0, 0), 1.0);
  const MixingMatrix two = MixingMatrix::ring(2);
  EXPECT_DOUBLE_EQ(two.weight(0, 0), 1.0 / 3);
  EXPECT_DOUBLE_EQ(two.weight(0, 1), 2.0 / 3);
  EXPECT_EQ(two.in_neighbours(0), std::vector<int>({1}));
  const MixingMatrix five = MixingMatrix::ring(5);
  EXPECT_DOUBLE_EQ(five.weight(2, 1), 1.0 / 3);
  EXPECT_DOUBLE_EQ(five.weight(2, 3), 1.0 / 3);
  EXPECT_DOUBLE_EQ(five.weight(2, 4), 0.0);
  EXPECT_EQ(five.in_neighbours(0), std::vector<int>({1, 4}));
  EXPECT_EQ(five.out_neighbours(0), std::vector<int>({1, 4}));
}

TEST(MixingMatrix, ExponentialGraphHearsPowersOfTwoBehind) {
  for (int n : {1, 2, 3, 8, 13, 64}) expect_doubly_stochastic(MixingMatrix::exponential(n));
  const MixingMatrix eight = MixingMatrix::exponential(8);  // tau = 3: hops 1, 2, 4
  EXPECT_EQ(eight.in_neighbours(0), std::vector<int>({4, 6, 7}));
  EXPECT_EQ(eight.out_neighbours(0), std::vector<int>({1, 2, 4}));
  EXPECT_DOUBLE_EQ(eight.weight(0, 6), 0.25);
  EXPECT_DOUBLE_EQ(eight.weight(0, 0), 0.25);
}

TEST(MixingMatrix, SecondEigenvalueIsTheRingsClosedFormAndThePowerIterationsRate) {
  const double pi = std::acos(-1.0);
  for (int n = 3; n <= 16; ++n) {
    const MixingMatrix ring = MixingMatrix::ring(n);
    EXPECT_NEAR(ring.second_largest_eigenvalue(), 1.0 / 3 + 2.0 / 3 * std::cos(2 * pi / n), 1e-12) << n;
  }
  for (int n : {6, 16}) {
    for (const MixingMatrix& w : {MixingMatrix::ring(n), MixingMatrix::exponential(n)}) {
      EXPECT_NEAR(w.second_largest_eigenvalue(), power_iteration_rate(w), 1e-3) << w.name() << " " << n;
    }
  }
  // The ring's gap 1 - lambda_2 closes as 1/n^2; the exponential graph's as 1/log2 n: for
  // n = 2^tau its lambda_2 is 1 - 2 / (tau + 1) (Ying et al. 2021).
  for (int tau : {3, 4, 5, 6}) {
    const int n = 1 << tau;
    const double ring = MixingMatrix::ring(n).second_largest_eigenvalue();
    const double expo = MixingMatrix::exponential(n).second_largest_eigenvalue();
    std::printf("n %2d: lambda_2 ring %.4f, exponential %.4f\n", n, ring, expo);
    EXPECT_NEAR(expo, 1 - 2.0 / (tau + 1), 1e-12) << n;
    EXPECT_LT(expo, ring) << n;
  }
}

}  // namespace
}  // namespace dist
}  // namespace tessera
