#include "optim/elementwise_optimizer.h"

#include "autograd/grad_mode.h"
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
      const bool low = p.dtype() == kF16 || p.dtype() == kBF16;
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
      const std::string prefix = "state." + std::to_string(index) + ".";
      out.set(prefix + "step", scalar_tensor(static_cast<double>(s.step), kI64));
      for (const auto& [name, t] : s.tensors) out.set(prefix + name, t);
    }
  }
  return out;
}

void ElementwiseOptimizer::load_state_dict(const StateDict& state) {
  load_param_groups(state);
  int64_t index = 0;
  const std::vector<ParamGroup>& groups = param_groups();
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    for (size_t pi = 0; pi < groups[gi].params.size(); ++pi, ++index) {
      const std::string prefix = "state." + std::to_string(index) + ".";
      ParamState fresh;
      const StateDict entries = state.with_prefix_removed(prefix);
      for (const auto& [name, t] : entries) {
        if (name == "step") {
          fresh.step = static_cast<int64_t>(t.item());
          continue;
        }
        const Variable& p = groups[gi].params[pi];
        TS_CHECK(t.shape() == p.shape(), "Optimizer::load_state_dict: '", prefix, name,
                 "' has shape ", t.shape(), " but parameter ", index, " (", p.name(), ") has ",
                 p.shape());
        const DType dtype = name == "master" ? kF32 : (p.dtype() == kF16 || p.dtype() == kBF16
                                                           ? kF32
                                                           : p.dtype());
        fresh.tensors[name] = t.to(dtype).to(p.device()).contiguous().clone();
      }
      state_[gi][pi] = std::move(fresh);
    }
  }
  const int64_t total = index;
  for (const auto& [name, t] : state) {
    if (name.rfind("state.", 0) != 0) continue;
    const int64_t i = std::stoll(name.substr(6, name.find('.', 6) - 6));
    TS_CHECK(i >= 0 && i < total, "Optimizer::load_state_dict: state for parameter ", i,
             " but this optimizer has ", total, " parameters");
  }
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
