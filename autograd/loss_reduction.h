// How a loss's per-row values become the loss (Reduction: mean, sum or none), and how the
// gradient of that loss comes back as one factor per row: shared by the losses of
// functions_loss.cc and by losses built elsewhere on record() (the class-parallel
// cross-entropy of dist/tensor_parallel).
#pragma once

#include "autograd/functions.h"
#include "tensor/ops.h"

namespace tessera {

// The per-row losses [N], reduced.
inline Tensor reduce_rows(const Tensor& rows, Reduction reduction) {
  switch (reduction) {
    case Reduction::kMean: return mean(rows);
    case Reduction::kSum: return sum(rows);
    case Reduction::kNone: return rows;
  }
  return rows;
}

// The upstream gradient g of the reduced loss as one factor per row, shaped to broadcast over
// a row's columns: [1, 1] for mean (g / n) and sum, [n, 1] for none.
inline Tensor per_row_grad(const Tensor& g, int64_t n, Reduction reduction) {
  switch (reduction) {
    case Reduction::kMean: return div(g.reshape({1, 1}), static_cast<double>(n));
    case Reduction::kSum: return g.reshape({1, 1});
    case Reduction::kNone: return g.reshape({n, 1});
  }
  return g;
}

}  // namespace tessera
