#include "dist/gossip/mixing_matrix.h"

#include <cmath>

#include "tensor/check.h"

namespace tessera {
namespace dist {

MixingMatrix::MixingMatrix(int n, std::string name)
    : n_(n), name_(std::move(name)), w_(static_cast<size_t>(n) * n, 0.0) {
  TS_CHECK(n >= 1, "MixingMatrix: n must be at least 1, got ", n);
}

MixingMatrix MixingMatrix::ring(int n) {
  MixingMatrix m(n, "ring");
  for (int i = 0; i < n; ++i) {
    // Self, left, right, a third each; on 2 ranks left and right coincide (2/3), on 1 all is self.
    for (int d : {0, -1, 1}) m.w_[static_cast<size_t>(i) * n + ((i + d) % n + n) % n] += 1.0 / 3;
  }
  return m;
}

MixingMatrix MixingMatrix::exponential(int n) {
  MixingMatrix m(n, "exponential");
  int tau = 0;
  while ((1 << tau) < n) ++tau;  // hops 1, 2, ..., 2^(tau-1) < n
  for (int i = 0; i < n; ++i) {
    m.w_[static_cast<size_t>(i) * n + i] += 1.0 / (tau + 1);
    for (int k = 0; k < tau; ++k) {
      m.w_[static_cast<size_t>(i) * n + ((i - (1 << k)) % n + n) % n] += 1.0 / (tau + 1);
    }
  }
  return m;
}

std::vector<int> MixingMatrix::in_neighbours(int i) const {
  std::vector<int> out;
  for (int j = 0; j < n_; ++j) {
    if (j != i && weight(i, j) > 0) out.push_back(j);
  }
  return out;
}

std::vector<int> MixingMatrix::out_neighbours(int i) const {
  std::vector<int> out;
  for (int j = 0; j < n_; ++j) {
    if (j != i && weight(j, i) > 0) out.push_back(j);
  }
  return out;
}

double MixingMatrix::second_largest_eigenvalue() const {
  const double pi = std::acos(-1.0);
  double worst = 0;
  for (int k = 1; k < n_; ++k) {
    double re = 0, im = 0;
    for (int j = 0; j < n_; ++j) {
      re += weight(0, j) * std::cos(2 * pi * j * k / n_);
      im -= weight(0, j) * std::sin(2 * pi * j * k / n_);
    }
    worst = std::max(worst, std::hypot(re, im));
  }
  return worst;
}

}  // namespace dist
}  // namespace tessera
