// Optimizer: the base of SGD, Adam and AdamW, as in LibTorch.
//
// Parameters come in groups; each group carries its own copy of the optimizer's options (so a
// scheduler can set one group's lr). Each parameter has its own state (momentum buffers, Adam's
// moments, a step count), created on its first step. An optimizer takes Variables, never a
// Module, so the distributed layers can hand it any subset (ZeRO-1 gives each rank its shard).
//
// Mixed precision: for an f16/bf16 parameter the state holds an f32 master copy; the update is
// computed on the master and the parameter receives the rounded result. This is the ZeRO paper's
// K = 12 bytes per parameter for Adam (master 4 + exp_avg 4 + exp_avg_sq 4).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/variable.h"
#include "tensor/state_dict.h"

namespace tessera {
namespace optim {

class OptimizerOptions {
 public:
  virtual ~OptimizerOptions() = default;
  virtual std::unique_ptr<OptimizerOptions> clone() const = 0;
  // The options as (name, value), for state_dict and printing; set() is their inverse.
  virtual std::vector<std::pair<std::string, double>> values() const = 0;
  virtual void set(const std::string& name, double value) = 0;
  virtual double lr() const = 0;
  virtual void set_lr(double lr) = 0;
};

struct ParamGroup {
  ParamGroup(std::vector<Variable> params, std::unique_ptr<OptimizerOptions> options = nullptr)
      : params(std::move(params)), options(std::move(options)) {}
  ParamGroup(const ParamGroup& other);
  ParamGroup& operator=(const ParamGroup& other);
  ParamGroup(ParamGroup&&) = default;
  ParamGroup& operator=(ParamGroup&&) = default;

  std::vector<Variable> params;
  std::unique_ptr<OptimizerOptions> options;  // null: the optimizer's defaults
};

struct ParamState {
  int64_t step = 0;
  std::map<std::string, Tensor> tensors;  // "momentum_buffer", "exp_avg", "master", ...
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Updates every parameter that has a gradient.
  void step();
  void zero_grad(bool set_to_none = true);

  std::vector<ParamGroup>& param_groups() { return groups_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  void add_param_group(ParamGroup group);
  // Parameters of all groups, in order.
  std::vector<Variable> parameters() const;

  // "param_groups.G.NAME" (f64 scalars), "state.I.step" (i64) and "state.I.NAME" with I the
  // parameter's index across all groups. load_state_dict checks shapes and restores.
  StateDict state_dict() const;
  void load_state_dict(const StateDict& state);
  // Bytes of optimizer state held (master copies included).
  int64_t state_bytes() const;

 protected:
  Optimizer(std::vector<ParamGroup> groups, std::unique_ptr<OptimizerOptions> defaults);
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
  const OptimizerOptions& defaults() const { return *defaults_; }

 private:
  std::vector<ParamGroup> groups_;
  std::unique_ptr<OptimizerOptions> defaults_;
  std::vector<std::vector<ParamState>> state_;  // [group][param]
};

}  // namespace optim
}  // namespace tessera
