// Strategies whose ranks hold different models (gossip, local SGD between rounds) evaluate and
// checkpoint the ranks' average: before evaluation every rank's model becomes the mean over
// the group (one all-reduce per floating-point tensor), its own kept aside and restored at its
// next training step. The consensus distance, 1/N sum_i ||w_i - mean w||^2 over the floating-
// point parameters and buffers, is measured on the way (the mean and each difference w_i - mean
// in the tensor's own precision, their squares summed in f64).
#pragma once

#include <vector>

#include "dist/process_group.h"
#include "nn/module.h"
#include "tensor/state_dict.h"

namespace tessera {
namespace train {

class AveragedEvaluation {
 public:
  // Collective. Returns the consensus distance before averaging.
  double average(nn::Module& model, dist::ProcessGroup& group);
  // This rank's own model back (a no-op unless average() ran since the last restore).
  void restore(nn::Module& model);
  // This rank's own model's state dict (copies), whether or not `model` holds the average now.
  StateDict own_state(const nn::Module& model) const;

 private:
  std::vector<Tensor> own_;
};

}  // namespace train
}  // namespace tessera
