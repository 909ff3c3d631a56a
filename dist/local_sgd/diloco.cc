#include "dist/local_sgd/diloco.h"

#include "dist/local_sgd/consensus_distance.h"
#include "dist/local_sgd/flat_tensors.h"
#include "dist/module_sync.h"
#include "dist/reduce_scalar.h"
#include "dist/trace_recorder.h"
#include "optim/sgd.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {

OuterOptimizerFactory nesterov_outer_optimizer(double lr, double momentum) {
  // Checked now, so a bad value is named where it was given.
  optim::SGDOptions(lr).momentum(momentum).nesterov(true).validate();
  return [lr, momentum](std::vector<Variable> global) -> std::unique_ptr<optim::Optimizer> {
    return std::make_unique<optim::SGD>(std::move(global),
                                        optim::SGDOptions(lr).momentum(momentum).nesterov(true));
  };
}

DiLoCo::DiLoCo(std::vector<Variable> params, std::vector<Variable> buffers,
               std::shared_ptr<ProcessGroup> group,
               const OuterOptimizerFactory& make_outer_optimizer, const DiLoCoOptions& options)
    : ModelAverager(std::move(group), options.inner_steps(), options.warmup_steps(),
                    options.measure_consensus_distance(), "DiLoCo", "inner_steps"),
      params_(std::move(params)), buffers_(std::move(buffers)) {
  TS_CHECK(!params_.empty(), "DiLoCo: got an empty parameter list");
  TS_CHECK(make_outer_optimizer != nullptr, "DiLoCo: the outer optimizer factory is empty");
  std::vector<std::pair<std::string, Variable>> named;
  for (size_t i = 0; i < params_.size(); ++i) {
    TS_CHECK(params_[i].defined() && is_floating(params_[i].dtype()), "DiLoCo: parameter ", i,
             " (", params_[i].defined() ? params_[i].name() : "undefined",
             ") must be a floating-point Variable");
    named.emplace_back(params_[i].name(), params_[i]);
  }
  for (const Variable& b : buffers_) {
    TS_CHECK(b.defined(), "DiLoCo: a buffer is undefined");
    if (is_floating(b.dtype())) float_buffers_.push_back(b);
  }
  // Every rank starts from rank 0's model, so every rank's global copy is the same.
  verify_same_parameters(named, ModelAverager::group());
  broadcast_parameters(params_, ModelAverager::group(), 0);
  broadcast_parameters(buffers_, ModelAverager::group(), 0);
  for (const Variable& p : params_) {
    Variable g(p.data().clone(), /*requires_grad=*/true);
    g.set_name(p.name());
    global_.push_back(g);
  }
  outer_ = make_outer_optimizer(global_);
  TS_CHECK(outer_ != nullptr, "DiLoCo: the outer optimizer factory returned no optimizer");
}

void DiLoCo::check_same(const std::vector<Variable>& params,
                        const std::vector<Variable>& buffers) const {
  TS_CHECK(params.size() == params_.size() && buffers.size() == buffers_.size(),
           "DiLoCo::average: got ", params.size(), " parameters and ", buffers.size(),
           " buffers, constructed with ", params_.size(), " and ", buffers_.size());
  for (size_t i = 0; i < params.size(); ++i) {
    TS_CHECK(params[i].is_same(params_[i]), "DiLoCo::average: parameter ", i, " (",
             params[i].name(), ") is not the Variable DiLoCo was constructed with (",
             params_[i].name(), ")");
  }
  for (size_t i = 0; i < buffers.size(); ++i) {
    TS_CHECK(buffers[i].is_same(buffers_[i]), "DiLoCo::average: buffer ", i,
             " is not the Variable DiLoCo was constructed with");
  }
}

bool DiLoCo::average(const std::vector<Variable>& params, const std::vector<Variable>& buffers) {
  check_same(params, buffers);
  const bool now = communicates_now();
  if (now) {
    outer_step();
  } else if (step() + 1 == warmup_steps()) {
    // The last warm-up step: DDP kept the replicas identical, so any rank's model is the
    // global model the first round starts from.
    for (size_t i = 0; i < params_.size(); ++i) Tensor(global_[i].data()).copy_(params_[i].data());
  }
  count_step();
  return now;
}

void DiLoCo::outer_step() {
  const size_t P = params_.size();
  std::vector<Tensor> layout;
  for (const Variable& p : params_) layout.push_back(p.data());
  for (const Variable& b : float_buffers_) layout.push_back(b.data());
  FlatTensors flat(layout, "DiLoCo");
  // The pseudo-gradients Delta_i = theta - theta_i and the buffers, in one buffer per dtype.
  for (size_t i = 0; i < P; ++i) flat.view(i).copy_(sub(global_[i].data(), params_[i].data()));
  for (size_t j = 0; j < float_buffers_.size(); ++j) {
    flat.view(P + j).copy_(float_buffers_[j].data());
  }
  {
    trace::LabelIfRecording label("all_reduce pseudo-gradients", "all_reduce");
    trace::SpanIfRecording span("wait for pseudo-gradients", "wait");
    flat.all_reduce_mean(group());
  }
  if (measures_consensus_distance()) {
    // w_i - mean w = (theta - Delta_i) - (theta - Delta) = Delta - Delta_i.
    std::vector<Tensor> mine, mean;
    for (size_t i = 0; i < P; ++i) {
      mine.push_back(sub(global_[i].data(), params_[i].data()));
      mean.push_back(flat.view(i));
    }
    trace::LabelIfRecording label("all_reduce consensus distance", "all_reduce");
    set_consensus_distance(
        all_reduce_scalar(squared_distance(mine, mean), group(), ReduceOp::kMean));
  }
  for (size_t i = 0; i < P; ++i) global_[i].set_grad(flat.view(i));
  trace::SpanIfRecording span("outer optimizer step", "optimizer");
  outer_->step();
  outer_->zero_grad();  // the views into `flat` go with it
  for (size_t i = 0; i < P; ++i) Tensor(params_[i].data()).copy_(global_[i].data());
  for (size_t j = 0; j < float_buffers_.size(); ++j) {
    Tensor(float_buffers_[j].data()).copy_(flat.view(P + j));
  }
}

StateDict DiLoCo::state_dict() const {
  StateDict out = ModelAverager::state_dict();
  for (size_t i = 0; i < global_.size(); ++i) {
    out.set("global." + std::to_string(i), global_[i].data());
  }
  out.merge(outer_->state_dict(), "outer.");
  return out;
}

void DiLoCo::load_state_dict(const StateDict& state) {
  const char* where = "DiLoCo::load_state_dict: ";
  std::vector<std::string> allowed = {"outer."};
  for (size_t i = 0; i < global_.size(); ++i) allowed.push_back("global." + std::to_string(i));
  const int64_t step = read_step(state, allowed);
  for (size_t i = 0; i < global_.size(); ++i) {
    const std::string key = "global." + std::to_string(i);
    const Tensor* t = state.find(key);
    TS_CHECK(t != nullptr, where, "missing '", key, "' (the global copy of parameter ", i, ", ",
             global_[i].name(), ")");
    TS_CHECK(t->shape() == global_[i].shape() && is_floating(t->dtype()), where, "'", key,
             "' is ", t->dtype(), t->shape(), ", parameter ", i, " (", global_[i].name(),
             ") is ", global_[i].dtype(), global_[i].shape());
  }
  // The outer optimizer checks its own keys before changing anything; then the copy.
  outer_->load_state_dict(state.with_prefix_removed("outer."));
  for (size_t i = 0; i < global_.size(); ++i) {
    Tensor(global_[i].data()).copy_(state.at("global." + std::to_string(i)));
  }
  set_step(step);
}

int64_t DiLoCo::state_bytes() const {
  int64_t bytes = outer_->state_bytes();
  for (const Variable& g : global_) bytes += static_cast<int64_t>(g.data().nbytes());
  return bytes;
}

}  // namespace dist
}  // namespace tessera
