#include "dist/local_sgd/post_local_sgd_optimizer.h"

#include "dist/module_sync.h"

namespace tessera {
namespace dist {

PostLocalSGDOptimizer::PostLocalSGDOptimizer(std::unique_ptr<optim::Optimizer> inner,
                                             std::shared_ptr<ModelAverager> averager,
                                             std::vector<Variable> buffers)
    : optim::Optimizer(nullptr), inner_(std::move(inner)), averager_(std::move(averager)),
      buffers_(std::move(buffers)) {
  TS_CHECK(inner_ != nullptr, "PostLocalSGDOptimizer: the inner optimizer is null");
  TS_CHECK(averager_ != nullptr, "PostLocalSGDOptimizer: the model averager is null");
  TS_CHECK(!inner_->parameters().empty(),
           "PostLocalSGDOptimizer: the inner optimizer has no parameters");
  for (size_t i = 0; i < buffers_.size(); ++i) {
    TS_CHECK(buffers_[i].defined(), "PostLocalSGDOptimizer: buffer ", i, " is undefined");
  }
  // This optimizer's groups hold the same parameters and copies of the inner options, which
  // schedulers set and step() hands back.
  for (const optim::ParamGroup& g : inner_->param_groups()) {
    Optimizer::add_param_group(optim::ParamGroup(g.params, g.options->clone()));
  }
  std::vector<std::pair<std::string, Variable>> named;
  for (const Variable& p : parameters()) named.emplace_back(p.name(), p);
  verify_same_parameters(named, averager_->group());
  broadcast_parameters(parameters(), averager_->group(), 0);
  broadcast_parameters(buffers_, averager_->group(), 0);
}

void PostLocalSGDOptimizer::add_param_group(optim::ParamGroup) {
  TS_FAIL("PostLocalSGDOptimizer: add_param_group is not supported (the groups are the inner "
          "optimizer's; give it every group before wrapping it)");
}

void PostLocalSGDOptimizer::step() {
  for (size_t g = 0; g < param_groups().size(); ++g) {
    inner_->param_groups()[g].options = param_groups()[g].options->clone();
  }
  inner_->step();
  communicated_ = averager_->average(parameters(), buffers_);
}

StateDict PostLocalSGDOptimizer::state_dict() const {
  StateDict out = inner_->state_dict();
  save_param_groups(out);  // this optimizer's options: a scheduler may have set them since
  out.merge(averager_->state_dict(), "averager.");
  return out;
}

void PostLocalSGDOptimizer::load_state_dict(const StateDict& state) {
  StateDict inner_state;
  for (const auto& [key, t] : state) {
    if (key.rfind("averager.", 0) != 0) inner_state.set(key, t);
  }
  TS_CHECK(state.contains("averager.step"), "PostLocalSGDOptimizer::load_state_dict: missing "
           "'averager.step' (was the state saved by a PostLocalSGDOptimizer?)");
  averager_->load_state_dict(state.with_prefix_removed("averager."));
  inner_->load_state_dict(inner_state);
  load_param_groups(inner_state);
}

int64_t PostLocalSGDOptimizer::state_bytes() const {
  return inner_->state_bytes() + averager_->state_bytes();
}

}  // namespace dist
}  // namespace tessera
