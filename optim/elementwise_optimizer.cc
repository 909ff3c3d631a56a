#include "optim/elementwise_optimizer.h"

#include <optional>

#include "autograd/grad_mode.h"
#include "optim/state_keys.h"
#include "tensor/ops.h"

namespace tessera {
namespace optim {

ElementwiseOptimizer::ElementwiseOptimizer(std::vector<ParamGroup> groups,
                                           std::unique_ptr<OptimizerOptions> defaults)
    : Optimizer(std::move(defaults)) {
  int64_t count = 0;
  for (const ParamGroup& g : groups) count += static_cast<int64_t>(g.params.size());
  TS_CHECK(count > 0, "Optimizer: got an empty parameter list (", groups.size(), " group",
           groups.size() == 1 ? "" : "s", ", no parameters). If the parameters come from a "
           "module, check that its layers are registered with register_module(): layers held "
           "only as members have no parameters in module->parameters()");
  for (ParamGroup& g : groups) add_param_group(std::move(g));
}

void ElementwiseOptimizer::add_param_group(ParamGroup group) {
  const size_t n = group.params.size();
  Optimizer::add_param_group(std::move(group));
  state_.emplace_back(n);
}

void ElementwiseOptimizer::step() {
  NoGradGuard no_grad;
  const std::vector<ParamGroup>& groups = param_groups();
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const ParamGroup& group = groups[gi];
    std::vector<PendingUpdate> updates;
    std::vector<size_t> low_precision;  // indices into group.params whose master is updated
    for (size_t pi = 0; pi < group.params.size(); ++pi) {
      const Variable& p = group.params[pi];
      if (!p.grad().defined()) continue;
      ParamState& state = state_[gi][pi];
      const bool low = is_half(p.dtype());
      if (low && !state.tensors.count("master")) {
        state.tensors["master"] = p.data().to(kF32).contiguous().clone();
      }
      const Tensor target = low ? state.tensors["master"] : p.data();
      TS_CHECK(target.is_contiguous(), "Optimizer: parameter ", p.name(),
               " is not contiguous; optimizers update parameters in place");
      ++state.step;
      updates.push_back({&state, target, p.grad().to(target.dtype()).contiguous()});
      if (low) low_precision.push_back(pi);
    }
    update_group(*group.options, updates);
    for (size_t pi : low_precision) {
      Tensor(group.params[pi].data()).copy_(state_[gi][pi].tensors["master"]);
    }
  }
}

void ElementwiseOptimizer::update_group(const OptimizerOptions& options,
                             std::vector<PendingUpdate>& updates) {
  for (PendingUpdate& u : updates) update(options, *u.state, u.param, u.grad);
}

StateDict ElementwiseOptimizer::state_dict() const {
  StateDict out;
  save_param_groups(out);
  int64_t index = 0;
  const std::vector<ParamGroup>& groups = param_groups();
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    for (size_t pi = 0; pi < groups[gi].params.size(); ++pi, ++index) {
      const ParamState& s = state_[gi][pi];
      if (s.step == 0) continue;
      const std::string prefix = state_key_prefix(index);
      out.set(prefix + "step", scalar_tensor(static_cast<double>(s.step), kI64));
      for (const auto& [name, t] : s.tensors) out.set(prefix + name, t);
    }
  }
  return out;
}

void ElementwiseOptimizer::load_state_dict(const StateDict& state) {
  const char* where = "Optimizer::load_state_dict: ";
  const std::vector<ParamGroup>& groups = param_groups();
  // Parameter index across groups -> (group, index in group), as state_dict numbers them.
  std::vector<std::pair<size_t, size_t>> slots;
  std::vector<std::vector<ParamState>> loaded(groups.size());
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    loaded[gi].resize(groups[gi].params.size());
    for (size_t pi = 0; pi < groups[gi].params.size(); ++pi) slots.emplace_back(gi, pi);
  }
  const size_t total = slots.size();
  // Every key and value is checked before anything changes.
  for (const auto& [key, t] : state) {
    if (key.rfind("param_groups.", 0) == 0) continue;  // load_param_groups checks these
    TS_CHECK(has_state_prefix(key), where, "unexpected key '", key,
             "': expected 'param_groups.G.NAME' or 'state.I.NAME'");
    const std::optional<StateKey> parsed = parse_state_key(key, total);
    TS_CHECK(parsed.has_value(), where, "key '", key,
             "' is not of the form 'state.I.NAME' with I a parameter index in [0, ", total, ")");
    const std::string& name = parsed->name;
    const auto [gi, pi] = slots[parsed->index];
    const Variable& p = groups[gi].params[pi];
    const std::string param = "parameter " + std::to_string(parsed->index) +
                              (p.name().empty() ? "" : " (" + p.name() + ")");
    ParamState& fresh = loaded[gi][pi];
    if (name == "step") {
      TS_CHECK(!is_floating(t.dtype()) && t.dtype() != kBool && t.numel() == 1, where, "'", key,
               "' is a ", t.dtype(), " tensor of shape ", t.shape(),
               ", expected a one-element integer tensor (the step count)");
      const double step = t.item();
      TS_CHECK(step >= 0, where, "'", key, "' is ", step, ", expected a step count >= 0");
      fresh.step = static_cast<int64_t>(step);
      continue;
    }
    TS_CHECK(is_floating(t.dtype()), where, "'", key, "' is a ", t.dtype(),
             " tensor, expected a floating-point one (", param, " is ", p.dtype(), ")");
    TS_CHECK(t.shape() == p.shape(), where, "'", key, "' has shape ", t.shape(), " but ", param,
             " has ", p.shape());
    const DType dtype = name == "master" || is_half(p.dtype()) ? kF32 : p.dtype();
    fresh.tensors[name] = t.to(dtype).to(p.device()).contiguous().clone();
  }
  for (size_t i = 0; i < total; ++i) {
    const ParamState& s = loaded[slots[i].first][slots[i].second];
    TS_CHECK(s.tensors.empty() || state.contains(state_key(i, "step")), where,
             "'", state_key(i, s.tensors.begin()->first), "' is present but '", state_key(i, "step"),
             "' is not");
  }
  load_param_groups(state);
  state_ = std::move(loaded);
}

int64_t ElementwiseOptimizer::state_bytes() const {
  int64_t bytes = 0;
  for (const auto& group : state_) {
    for (const ParamState& s : group) {
      for (const auto& [name, t] : s.tensors) bytes += static_cast<int64_t>(t.nbytes());
    }
  }
  return bytes;
}

}  // namespace optim
}  // namespace tessera
