#include "optim/sgd.h"

#include <map>
#include <tuple>

#include "tensor/fused_updates.h"
#include "tensor/ops.h"

namespace tessera {
namespace optim {

std::unique_ptr<OptimizerOptions> SGDOptions::clone() const {
  return std::make_unique<SGDOptions>(*this);
}

std::vector<std::pair<std::string, double>> SGDOptions::values() const {
  return {{"lr", lr_}, {"momentum", momentum_}, {"dampening", dampening_},
          {"weight_decay", weight_decay_}, {"nesterov", nesterov_ ? 1.0 : 0.0}};
}

void SGDOptions::set(const std::string& name, double value) {
  if (name == "lr") lr_ = value;
  else if (name == "momentum") momentum_ = value;
  else if (name == "dampening") dampening_ = value;
  else if (name == "weight_decay") weight_decay_ = value;
  else if (name == "nesterov") nesterov_ = value != 0;
  else TS_FAIL("SGDOptions: unknown option '", name, "'");
  validate();
}

void SGDOptions::validate() const {
  TS_CHECK(lr_ >= 0, "SGD: invalid learning rate ", lr_);
  TS_CHECK(momentum_ >= 0, "SGD: invalid momentum ", momentum_);
  TS_CHECK(weight_decay_ >= 0, "SGD: invalid weight_decay ", weight_decay_);
  TS_CHECK(!nesterov_ || (momentum_ > 0 && dampening_ == 0),
           "SGD: Nesterov momentum needs momentum > 0 and dampening = 0, got momentum ",
           momentum_, " and dampening ", dampening_);
}

namespace {
std::vector<ParamGroup> one_group(std::vector<Variable> params) {
  std::vector<ParamGroup> groups;
  groups.emplace_back(std::move(params));
  return groups;
}
std::unique_ptr<OptimizerOptions> checked(const SGDOptions& options) {
  options.validate();
  return options.clone();
}
}  // namespace

SGD::SGD(std::vector<Variable> params, const SGDOptions& options)
    : SGD(one_group(std::move(params)), options) {}

SGD::SGD(std::vector<ParamGroup> groups, const SGDOptions& defaults)
    : ElementwiseOptimizer(std::move(groups), checked(defaults)) {
  for (const ParamGroup& g : param_groups()) static_cast<const SGDOptions&>(*g.options).validate();
}

namespace {

SgdUpdate sgd_update_for(const SGDOptions& o) {
  SgdUpdate u;
  u.lr = o.lr();
  u.momentum = o.momentum();
  u.dampening = o.dampening();
  u.weight_decay = o.weight_decay();
  u.nesterov = o.nesterov();
  return u;
}

// The parameter's momentum buffer (made on its first update, which *first_step reports).
Tensor momentum_buffer(const SGDOptions& o, ParamState& state, const Tensor& param,
                       bool* first_step) {
  *first_step = false;
  if (o.momentum() == 0) return Tensor();
  auto it = state.tensors.find("momentum_buffer");
  *first_step = it == state.tensors.end();
  if (*first_step) it = state.tensors.emplace("momentum_buffer", empty_like(param)).first;
  return it->second;
}

}  // namespace

void SGD::update(const OptimizerOptions& options, ParamState& state, const Tensor& param,
                 const Tensor& grad) {
  const auto& o = static_cast<const SGDOptions&>(options);
  SgdUpdate u = sgd_update_for(o);
  const Tensor buffer = momentum_buffer(o, state, param, &u.first_step);
  sgd_update_(param, grad, buffer, u);
}

// Parameters that share dtype, device and first-step-ness update together (multi-tensor).
void SGD::update_group(const OptimizerOptions& options, std::vector<PendingUpdate>& updates) {
  const auto& o = static_cast<const SGDOptions&>(options);
  std::map<std::tuple<int, int, int, bool>, std::vector<SgdTensors>> batches;
  for (PendingUpdate& u : updates) {
    bool first = false;
    const Tensor buffer = momentum_buffer(o, *u.state, u.param, &first);
    const Device d = u.param.device();
    batches[std::make_tuple(static_cast<int>(u.param.dtype()), static_cast<int>(d.type()),
                            d.index(), first)]
        .push_back({u.param, u.grad, buffer});
  }
  for (const auto& [key, list] : batches) {
    SgdUpdate u = sgd_update_for(o);
    u.first_step = std::get<3>(key);
    sgd_update_many_(list, u);
  }
}

}  // namespace optim
}  // namespace tessera
