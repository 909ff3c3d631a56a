// Comparing trained models in tests: the largest element-wise difference between two state
// dicts with the same keys (a key missing from `b` is an error).
#pragma once

#include <algorithm>

#include "tensor/ops.h"
#include "tensor/state_dict.h"

namespace tessera {
namespace testing {

inline double largest_difference(const StateDict& a, const StateDict& b) {
  double worst = 0;
  for (const auto& [name, t] : a) worst = std::max(worst, max_abs_diff(t, b.at(name)));
  return worst;
}

}  // namespace testing
}  // namespace tessera
