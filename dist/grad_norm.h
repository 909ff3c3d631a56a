// The global gradient norm of a model split across process groups: the reduction that
// optim::clip_grad_norm(held, counted, max_norm, reduce) takes (optim/clip_grad.h explains the
// counting), made from the groups whose ranks hold disjoint parts of the model.
//
//   layout                                   sum the counted squares over
//   DDP, pipeline x DDP replicas             the pipeline group (each stage its own parameters;
//                                            replicas hold equal averaged gradients: not summed)
//   ZeRO-1/2/3 shards                        the data-parallel group (each rank its shard)
//   tensor parallelism                       the tensor-parallel group (each rank its slices;
//                                            replicated parameters counted on rank 0 only:
//                                            tensor_parallel::norm_counted_parameters)
//   3D: P x T x D                            tensor-parallel, then pipeline (and data-parallel
//                                            under ZeRO)
#pragma once

#include <memory>
#include <vector>

#include "dist/process_group.h"
#include "optim/clip_grad.h"

namespace tessera {
namespace dist {

// Sums a rank's squared norm over each group in turn (null groups and groups of one rank are
// skipped). Collective over every group given.
optim::SquaredNormReduction sum_over(std::vector<std::shared_ptr<ProcessGroup>> groups);

// Collective: optim::clip_grad_norm(held, counted, max_norm, sum_over(groups)).
double clip_grad_norm(const std::vector<Variable>& held, const std::vector<Variable>& counted,
                      double max_norm, std::vector<std::shared_ptr<ProcessGroup>> groups);

}  // namespace dist
}  // namespace tessera
