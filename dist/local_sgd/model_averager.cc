#include "dist/local_sgd/model_averager.h"

#include <limits>

#include "dist/local_sgd/consensus_distance.h"
#include "dist/local_sgd/flat_tensors.h"
#include "dist/reduce_scalar.h"
#include "dist/trace_recorder.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {

bool communicates_after(int64_t step, int64_t period, int64_t warmup_steps) {
  TS_CHECK(period >= 1, "communicates_after: period must be >= 1, got ", period);
  TS_CHECK(warmup_steps >= 0, "communicates_after: warmup_steps must be >= 0, got ", warmup_steps);
  return step >= warmup_steps && (step - warmup_steps + 1) % period == 0;
}

void average_parameters(const std::vector<Variable>& params, const std::vector<Variable>& buffers,
                        ProcessGroup& group, double* consensus_distance) {
  // Parameters first, then the floating-point buffers: the flat layout every rank shares.
  std::vector<Tensor> tensors;
  for (const Variable& p : params) tensors.push_back(p.data());
  for (const Variable& b : buffers) {
    if (is_floating(b.dtype())) tensors.push_back(b.data());
  }
  FlatTensors flat(tensors, "average_parameters");
  flat.pack(tensors);
  {
    trace::LabelIfRecording label("all_reduce model average", "all_reduce");
    trace::SpanIfRecording span("wait for model average", "wait");
    flat.all_reduce_mean(group);
  }
  if (consensus_distance != nullptr) {
    // Before the parameters are overwritten: this rank's distance to the mean.
    std::vector<Tensor> mine, mean;
    for (size_t i = 0; i < params.size(); ++i) {
      mine.push_back(tensors[i]);
      mean.push_back(flat.view(i));
    }
    trace::LabelIfRecording label("all_reduce consensus distance", "all_reduce");
    *consensus_distance = all_reduce_scalar(squared_distance(mine, mean), group, ReduceOp::kMean);
  }
  flat.unpack(tensors);
}

ModelAverager::ModelAverager(std::shared_ptr<ProcessGroup> group, int64_t period,
                             int64_t warmup_steps, bool measure_consensus_distance,
                             const std::string& who, const std::string& period_name)
    : group_(std::move(group)), period_(period), warmup_steps_(warmup_steps),
      measure_(measure_consensus_distance), who_(who),
      consensus_distance_(std::numeric_limits<double>::quiet_NaN()) {
  TS_CHECK(group_ != nullptr, who_, ": the process group is null");
  TS_CHECK(period_ >= 1, who_, ": ", period_name, " (H, local steps per round) must be >= 1, got ",
           period_);
  TS_CHECK(warmup_steps_ >= 0, who_, ": warmup_steps must be >= 0, got ", warmup_steps_);
}

StateDict ModelAverager::state_dict() const {
  StateDict out;
  out.set("step", scalar_tensor(static_cast<double>(step_), kI64));
  return out;
}

int64_t ModelAverager::read_step(const StateDict& state,
                                 const std::vector<std::string>& allowed) const {
  const std::string where = who_ + "::load_state_dict: ";
  for (const auto& [key, t] : state) {
    bool ok = key == "step";
    for (const std::string& a : allowed) {
      ok = ok || key == a || (!a.empty() && a.back() == '.' && key.rfind(a, 0) == 0);
    }
    TS_CHECK(ok, where, "unexpected key '", key, "' (expected 'step'",
             allowed.empty() ? "" : " and ", allowed, ")");
  }
  const Tensor* step = state.find("step");
  TS_CHECK(step != nullptr, where, "missing 'step' (was the state saved by a ", who_, "?)");
  TS_CHECK(!is_floating(step->dtype()) && step->dtype() != kBool && step->numel() == 1, where,
           "'step' is a ", step->dtype(), " tensor of shape ", step->shape(),
           ", expected a one-element integer tensor");
  const double value = step->item();
  TS_CHECK(value >= 0, where, "'step' is ", value, ", expected a step count >= 0");
  return static_cast<int64_t>(value);
}

void ModelAverager::load_state_dict(const StateDict& state) { step_ = read_step(state, {}); }

}  // namespace dist
}  // namespace tessera
