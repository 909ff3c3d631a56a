// Optimizer: what every optimizer presents, as in LibTorch: parameter groups, step(),
// zero_grad(), state_dict() and the bytes of state held. LR schedulers, gradient clipping,
// GradScaler and checkpoints use only this, so they treat a plain optimizer and a sharded one
// (dist::ZeroRedundancyOptimizer) alike.
//
// Parameters come in groups; each group carries its own copy of the optimizer's options (so a
// scheduler can set one group's lr). An optimizer takes Variables, never a Module, so the
// distributed layers can hand it any subset (ZeRO gives each rank's inner optimizer its shard).
// SGD, Adam and AdamW derive from ElementwiseOptimizer (optim/elementwise_optimizer.h).
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

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Updates every parameter that has a gradient.
  virtual void step() = 0;
  // Drops (set_to_none, PyTorch's default) or zeroes the gradients of every parameter.
  virtual void zero_grad(bool set_to_none = true);

  std::vector<ParamGroup>& param_groups() { return groups_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  virtual void add_param_group(ParamGroup group);
  // Parameters of all groups, in order.
  std::vector<Variable> parameters() const;
  // The Variables whose .grad() step() reads on this rank: the parameters, or for a sharded
  // optimizer (ZeRO stage 2) the shard its gradients were reduced into. GradScaler unscales
  // and checks these.
  virtual std::vector<Variable> gradient_variables() const { return parameters(); }

  // "param_groups.G.NAME" (f64 scalars), "state.I.step" (i64) and "state.I.NAME" with I the
  // parameter's index across all groups. load_state_dict checks shapes and restores.
  virtual StateDict state_dict() const = 0;
  virtual void load_state_dict(const StateDict& state) = 0;
  // Bytes of optimizer state held on this rank (master copies included).
  virtual int64_t state_bytes() const = 0;

 protected:
  // Groups are added by the derived class's constructor. `defaults` fills in the options of
  // groups added without any; it may be null only for optimizers whose groups always bring
  // their own (ZeRO's one group copies its inner optimizer's).
  explicit Optimizer(std::unique_ptr<OptimizerOptions> defaults);
  const OptimizerOptions& defaults() const { return *defaults_; }
  // The "param_groups.G.NAME" entries of state_dict, and their inverse.
  void save_param_groups(StateDict& out) const;
  void load_param_groups(const StateDict& state);

 private:
  std::vector<ParamGroup> groups_;
  std::unique_ptr<OptimizerOptions> defaults_;
};

}  // namespace optim
}  // namespace tessera
