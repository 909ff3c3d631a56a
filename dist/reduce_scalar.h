// One number across ranks (a loss to average, correct answers to count), in one call:
//   double mean_loss = dist::all_reduce_scalar(loss.item(), *world, dist::ReduceOp::kMean);
#pragma once

#include "dist/process_group.h"

namespace tessera {
namespace dist {

// Collective. The reduction of every rank's `value` (computed in f64), on every rank.
double all_reduce_scalar(double value, ProcessGroup& group, ReduceOp op = ReduceOp::kSum);

}  // namespace dist
}  // namespace tessera
