#include "dist/grad_norm.h"

#include <utility>

#include "dist/reduce_scalar.h"

namespace tessera {
namespace dist {

optim::SquaredNormReduction sum_over(std::vector<std::shared_ptr<ProcessGroup>> groups) {
  return [groups = std::move(groups)](double local) {
    // Groups are orthogonal (a Topology's): summing over one and then the next adds up every
    // rank's part exactly once.
    double total = local;
    for (const auto& g : groups) {
      if (g != nullptr && g->size() > 1) total = all_reduce_scalar(total, *g, ReduceOp::kSum);
    }
    return total;
  };
}

double clip_grad_norm(const std::vector<Variable>& held, const std::vector<Variable>& counted,
                      double max_norm, std::vector<std::shared_ptr<ProcessGroup>> groups) {
  return optim::clip_grad_norm(held, counted, max_norm, sum_over(std::move(groups)));
}

}  // namespace dist
}  // namespace tessera
