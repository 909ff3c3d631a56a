// Every parameter's gradient of a tensor-parallel model in the unsplit model's layout: each
// rank's slices gathered over the group as a checkpoint gathers optimizer state
// (dist/tensor_parallel/optimizer_state.h). Collective over the model's tensor-parallel groups.
#pragma once

#include <string>
#include <vector>

#include "dist/tensor_parallel/optimizer_state.h"
#include "nn/module.h"
#include "tensor/state_dict.h"

namespace tessera {
namespace testing {

inline std::vector<Tensor> gathered_grads(nn::Module& model) {
  StateDict local;
  const std::vector<Variable> params = model.parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    local.set("state." + std::to_string(i) + ".grad", params[i].grad());
  }
  const StateDict full = dist::tensor_parallel::gather_optimizer_state(local, model);
  std::vector<Tensor> out;
  for (size_t i = 0; i < params.size(); ++i) {
    out.push_back(full.at("state." + std::to_string(i) + ".grad"));
  }
  return out;
}

}  // namespace testing
}  // namespace tessera
