#include "optim/adam.h"

#include <map>
#include <tuple>

#include "tensor/fused_updates.h"
#include "tensor/ops.h"

namespace tessera {
namespace optim {

std::unique_ptr<OptimizerOptions> AdamOptions::clone() const {
  return std::make_unique<AdamOptions>(*this);
}

std::vector<std::pair<std::string, double>> AdamOptions::values() const {
  return {{"lr", lr_}, {"beta1", beta1_}, {"beta2", beta2_}, {"eps", eps_},
          {"weight_decay", weight_decay_}, {"amsgrad", amsgrad_ ? 1.0 : 0.0}};
}

void AdamOptions::set(const std::string& name, double value) {
  if (name == "lr") lr_ = value;
  else if (name == "beta1") beta1_ = value;
  else if (name == "beta2") beta2_ = value;
  else if (name == "eps") eps_ = value;
  else if (name == "weight_decay") weight_decay_ = value;
  else if (name == "amsgrad") amsgrad_ = value != 0;
  else TS_FAIL("AdamOptions: unknown option '", name, "'");
  validate();
}

void AdamOptions::validate() const {
  TS_CHECK(lr_ >= 0, "Adam: invalid learning rate ", lr_);
  TS_CHECK(eps_ >= 0, "Adam: invalid eps ", eps_);
  TS_CHECK(beta1_ >= 0 && beta1_ < 1 && beta2_ >= 0 && beta2_ < 1,
           "Adam: betas must be in [0, 1), got (", beta1_, ", ", beta2_, ")");
  TS_CHECK(weight_decay_ >= 0, "Adam: invalid weight_decay ", weight_decay_);
}

namespace {
std::vector<ParamGroup> one_group(std::vector<Variable> params) {
  std::vector<ParamGroup> groups;
  groups.emplace_back(std::move(params));
  return groups;
}
std::unique_ptr<OptimizerOptions> checked(const AdamOptions& options) {
  options.validate();
  return options.clone();
}
}  // namespace

Adam::Adam(std::vector<Variable> params, const AdamOptions& options)
    : Adam(one_group(std::move(params)), options, false) {}

Adam::Adam(std::vector<ParamGroup> groups, const AdamOptions& defaults)
    : Adam(std::move(groups), defaults, false) {}

Adam::Adam(std::vector<ParamGroup> groups, const AdamOptions& defaults, bool decoupled)
    : ElementwiseOptimizer(std::move(groups), checked(defaults)), decoupled_(decoupled) {
  for (const ParamGroup& g : param_groups()) static_cast<const AdamOptions&>(*g.options).validate();
}

namespace {

AdamUpdate adam_update_for(const AdamOptions& o, bool decoupled, int64_t step) {
  AdamUpdate u;
  u.lr = o.lr();
  u.beta1 = o.betas().first;
  u.beta2 = o.betas().second;
  u.eps = o.eps();
  u.weight_decay = o.weight_decay();
  u.decoupled_weight_decay = decoupled;
  u.amsgrad = o.amsgrad();
  u.step = step;
  return u;
}

// The parameter's state tensors, created (zeros) on its first update.
AdamTensors adam_tensors(const AdamOptions& o, ParamState& state, const Tensor& param,
                         const Tensor& grad) {
  for (const char* name : {"exp_avg", "exp_avg_sq"}) {
    if (!state.tensors.count(name)) state.tensors[name] = zeros_like(param);
  }
  if (o.amsgrad() && !state.tensors.count("max_exp_avg_sq")) {
    state.tensors["max_exp_avg_sq"] = zeros_like(param);
  }
  return {param, grad, state.tensors["exp_avg"], state.tensors["exp_avg_sq"],
          o.amsgrad() ? state.tensors["max_exp_avg_sq"] : Tensor()};
}

}  // namespace

void Adam::update(const OptimizerOptions& options, ParamState& state, const Tensor& param,
                  const Tensor& grad) {
  const auto& o = static_cast<const AdamOptions&>(options);
  const AdamTensors t = adam_tensors(o, state, param, grad);
  adam_update_(t.param, t.grad, t.exp_avg, t.exp_avg_sq, t.max_exp_avg_sq,
               adam_update_for(o, decoupled_, state.step));
}

// Parameters that share dtype, device and step count update together (multi-tensor kernels).
void Adam::update_group(const OptimizerOptions& options, std::vector<PendingUpdate>& updates) {
  const auto& o = static_cast<const AdamOptions&>(options);
  std::map<std::tuple<int, int, int, int64_t>, std::vector<AdamTensors>> batches;
  for (PendingUpdate& u : updates) {
    const Device d = u.param.device();
    const auto key = std::make_tuple(static_cast<int>(u.param.dtype()),
                                     static_cast<int>(d.type()), d.index(), u.state->step);
    batches[key].push_back(adam_tensors(o, *u.state, u.param, u.grad));
  }
  for (const auto& [key, list] : batches) {
    adam_update_many_(list, adam_update_for(o, decoupled_, std::get<3>(key)));
  }
}

AdamW::AdamW(std::vector<Variable> params, const AdamOptions& options)
    : Adam(one_group(std::move(params)), options, true) {}

AdamW::AdamW(std::vector<ParamGroup> groups, const AdamOptions& defaults)
    : Adam(std::move(groups), defaults, true) {}

}  // namespace optim
}  // namespace tessera
