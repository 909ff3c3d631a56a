// gradcheck: compares autograd's gradients with central finite differences.
//
// For f mapping inputs to one output Variable, it draws a fixed random projection r of the
// output and checks d<r, f(x)>/dx from backward against
//     (<r, f(x + eps e_j)> - <r, f(x - eps e_j)>) / (2 eps)
// for every element j of every input. Inputs should be f64 for tight tolerances; they may be
// non-contiguous views (perturbations are written through their strides).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "autograd/variable.h"

namespace tessera {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-6;
  double rtol = 1e-4;
  uint64_t seed = 0;
};

struct GradcheckResult {
  bool ok = true;
  double max_abs_error = 0;
  std::string message;  // the first mismatch, naming input, element and both values
};

using GradcheckFn = std::function<Variable(const std::vector<Variable>&)>;

GradcheckResult gradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& options = {});

}  // namespace tessera
