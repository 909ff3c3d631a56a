// ElementwiseOptimizer: the base of SGD, Adam and AdamW, whose update of each element depends
// only on that element's parameter, gradient and state.
//
// Each parameter has its own state (momentum buffers, Adam's moments, a step count), created on
// its first step. Because every element is updated on its own, stepping any slice of the
// parameters gives exactly the values stepping the whole would: this is what lets ZeRO hand each
// rank's inner optimizer one shard of the flat parameter vector (dist/zero/zero_optimizer.h).
//
// Mixed precision: for an f16/bf16 parameter the state holds an f32 master copy; the update is
// computed on the master and the parameter receives the rounded result. This is the ZeRO paper's
// K = 12 bytes per parameter for Adam (master 4 + exp_avg 4 + exp_avg_sq 4).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "optim/optimizer.h"

namespace tessera {
namespace optim {

struct ParamState {
  int64_t step = 0;
  std::map<std::string, Tensor> tensors;  // "momentum_buffer", "exp_avg", "master", ...
};

class ElementwiseOptimizer : public Optimizer {
 public:
  void step() override;
  void add_param_group(ParamGroup group) override;
  StateDict state_dict() const override;
  void load_state_dict(const StateDict& state) override;
  int64_t state_bytes() const override;

 protected:
  // An empty parameter list is an error (PyTorch: "optimizer got an empty parameter list").
  ElementwiseOptimizer(std::vector<ParamGroup> groups, std::unique_ptr<OptimizerOptions> defaults);
  // Applies one update to `param` (the f32 master for f16/bf16 parameters) from `grad` (in
  // param's dtype). state.step was already incremented.
  virtual void update(const OptimizerOptions& options, ParamState& state, const Tensor& param,
                      const Tensor& grad) = 0;
  // One group's updates together (in parameter order), so a device can run them as one
  // multi-tensor launch; by default update() one by one.
  struct PendingUpdate {
    ParamState* state;
    Tensor param;  // the f32 master for f16/bf16 parameters
    Tensor grad;   // in param's dtype, contiguous
  };
  virtual void update_group(const OptimizerOptions& options, std::vector<PendingUpdate>& updates);

 private:
  std::vector<std::vector<ParamState>> state_;  // [group][param]
};

}  // namespace optim
}  // namespace tessera
