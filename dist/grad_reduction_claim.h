// Who reduces each parameter's gradient across ranks.
//
// DDP all-reduces gradients during backward; ZeRO reduce-scatters them (stage 1 in step(),
// stage 2 during backward). Wrapping a model in DDP and also giving its parameters to a ZeRO
// optimizer would reduce every gradient twice: the same result for twice the traffic, silently.
// So each of them claims the parameters whose gradients it reduces, for as long as it lives, and
// a second claim on a parameter is an error naming both claimants:
//
//   DistributedDataParallel ddp(model, world);                  claims model's parameters
//   ZeroRedundancyOptimizer zero(model->parameters(), ...);     error: already reduced by DDP
//
// The way to combine them is ZeRO alone: it reduces the gradients itself, so the model is used
// unwrapped (and dist::sync_buffers keeps BatchNorm statistics in step for evaluation).
#pragma once

#include <string>
#include <vector>

#include "autograd/variable.h"

namespace tessera {
namespace dist {

class GradReductionClaim {
 public:
  GradReductionClaim() = default;
  // Throws, claiming nothing, when any parameter is already claimed. `clip_with` (ZeRO, FSDP):
  // the parameters' own gradients are not their whole, reduced gradients while claimed, and
  // this says how to clip them instead (Variable::grad_held_by; optim::clip_grad_norm refuses
  // them naming it).
  GradReductionClaim(const std::vector<Variable>& params, std::string owner,
                     std::string clip_with = "");
  ~GradReductionClaim();
  GradReductionClaim(GradReductionClaim&& other) noexcept;
  GradReductionClaim& operator=(GradReductionClaim&& other) noexcept;
  GradReductionClaim(const GradReductionClaim&) = delete;
  GradReductionClaim& operator=(const GradReductionClaim&) = delete;

 private:
  void release();
  std::vector<Variable> claimed_;
};

}  // namespace dist
}  // namespace tessera
