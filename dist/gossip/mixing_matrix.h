// MixingMatrix: who a decentralized worker averages with, and how much (Lian et al. 2017,
// D-PSGD; Boyd et al. 2006, gossip). W is n x n, doubly stochastic (every row and column sums
// to 1), W_ij > 0 only when j talks to i; one gossip step is w_i <- sum_j W_ij w_j.
//
//   ring (the lecture's formula)            exponential graph (Ying et al. 2021)
//   W_ii = W_i,i-1 = W_i,i+1 = 1/3          rank i hears i - 2^0, i - 2^1, ..., i - 2^(tau-1)
//                                           (mod n), tau = ceil(log2 n); each weight 1/(tau + 1)
//     0 ── 1 ── 2                                  0 ──> 1 ──> 2 ──> 3
//     └──── ... ────┘                              └──────> 2     └──> ... (hops 1, 2, 4, ...)
//
// On 2 ranks a ring's left and right neighbour are the same rank: it is counted twice, so
// W = [[1/3, 2/3], [2/3, 1/3]] (still doubly stochastic; one message per step, weight 2/3). On 1
// rank W = [1].
//
// How fast gossip mixes is the second largest eigenvalue magnitude: after t steps a
// disagreement shrinks like lambda_2^t. Both matrices are circulant (row i is row 0 shifted by
// i), so their eigenvalues are the discrete Fourier transform of row 0:
// lambda_k = sum_j W_0j e^(-2 pi i j k / n). For the ring lambda_2 = 1/3 + 2/3 cos(2 pi / n)
// = 1 - O(1/n^2): mixing slows quadratically with n, which is why large n wants the exponential
// graph, whose lambda_2 is 1 - 2 / (log2 n + 1) for n a power of 2 (0.5 at 8 ranks, 0.71 at 64,
// against the ring's 0.80 and 0.997; the test checks both closed forms).
#pragma once

#include <string>
#include <vector>

namespace tessera {
namespace dist {

class MixingMatrix {
 public:
  static MixingMatrix ring(int n);
  static MixingMatrix exponential(int n);

  int size() const { return n_; }
  double weight(int i, int j) const { return w_[static_cast<size_t>(i) * n_ + j]; }
  // The ranks rank i receives from (W_ij > 0, j != i) and sends to (W_ji > 0, j != i), each
  // listed once, ascending.
  std::vector<int> in_neighbours(int i) const;
  std::vector<int> out_neighbours(int i) const;
  // max over k != 0 of |lambda_k| (the matrices here are circulant: the DFT of row 0).
  double second_largest_eigenvalue() const;
  const std::string& name() const { return name_; }

 private:
  MixingMatrix(int n, std::string name);
  int n_;
  std::string name_;
  std::vector<double> w_;  // row-major
};

}  // namespace dist
}  // namespace tessera
