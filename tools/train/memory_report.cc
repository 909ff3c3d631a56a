#include "tools/train/memory_report.h"

#include <optional>

#include "tensor/allocator.h"

namespace tessera {
namespace train {

namespace {

// What --strategy shards, in the ZeRO paper's stages (one process, DDP and the others: nothing).
dist::zero::Sharding sharding_of(const std::string& strategy) {
  using dist::zero::Sharding;
  return strategy == "zero1"   ? Sharding::kStage1
         : strategy == "zero2" ? Sharding::kStage2
         : strategy == "zero3" ? Sharding::kStage3
                               : Sharding::kNone;
}

// The formula's inputs from the flags; none for strategies it does not cover.
std::optional<dist::zero::ModelStateBytes> predicted(const RunContext& run) {
  const Config& c = run.config;
  using dist::zero::Sharding;
  // Asynchronous SGD's ranks hold different things (servers: a shard and its optimizer state).
  if (c.tensor_parallel > 1 || c.strategy == "pipeline" || c.strategy == "async") {
    return std::nullopt;
  }
  const Sharding sharding = sharding_of(c.strategy);
  const int64_t param_bytes = c.param_dtype == "f32" ? 4 : 2;
  const int64_t moment_bytes = c.optimizer == "sgd" ? (c.momentum > 0 ? 4 : 0) : 8;
  dist::zero::ModelStateBytes p = dist::zero::predicted_model_state(
      sharding, run.parameters, param_bytes, moment_bytes, run.ranks);
  // --offload: the moments (and ZeRO-1/2's f32 shard) are in the store between steps.
  if (c.offload != "none") p.optimizer = 0;
  // --offload=all: ZeRO-3's master and gradient shards too.
  if (c.offload == "all") p.parameters = p.gradients = 0;
  return p;
}

}  // namespace

std::optional<int64_t> predicted_comm_bytes_per_step(const RunContext& run) {
  const Config& c = run.config;
  using dist::zero::Sharding;
  if (run.ranks <= 1 || c.tensor_parallel > 1 || c.strategy == "pipeline") return std::nullopt;
  // Compression, gossip and local SGD report their own figures (local SGD sends DDP's bytes in
  // its warm-up steps and one model average per round after them: no one per-step formula).
  if (c.compression != "none" || c.strategy == "gossip" || c.strategy == "local-sgd") {
    return std::nullopt;
  }
  if (c.strategy == "async") {
    // Rank 0 is server 0: each iteration it answers every worker's pull with its shard.
    const int64_t shard = dist::balanced_counts(run.parameters, c.servers)[0];
    return static_cast<int64_t>(run.ranks - c.servers) * shard * 4;
  }
  const Sharding sharding = sharding_of(c.strategy);
  const int64_t param_bytes = c.param_dtype == "f32" ? 4 : 2;
  // ZeRO-1/2 reduce and gather their f32 flat vector; DDP and ZeRO-3 the parameters' dtype.
  const bool flat_f32 = sharding == Sharding::kStage1 || sharding == Sharding::kStage2;
  const int64_t traffic = dist::zero::predicted_comm_bytes(
      sharding, run.parameters, flat_f32 ? 4 : param_bytes, run.ranks);
  const bool scaling = run.precision.scaler().is_enabled();
  return traffic + 8 + (scaling ? 4 : 0);
}

void MemoryReport::before_step(const RunContext& run) {
  peak_before_ = memory_stats(run.device).peak_bytes;
  reset_peak(run.device);
}

void MemoryReport::after_backward(const RunContext& run) {
  measured_ = dist::zero::measured_model_state(run.strategy.model_state_parameters(),
                                               run.strategy.optimizer());
}

void MemoryReport::after_step(const RunContext& run) {
  step_peak_ = memory_stats(run.device).peak_bytes;
  taken_ = true;
}

std::vector<int64_t> MemoryReport::figures() const {
  return {taken_ ? 1 : 0, measured_.parameters, measured_.gradients, measured_.optimizer,
          step_peak_};
}

std::string MemoryReport::json(const RunContext& run,
                               const std::vector<std::vector<int64_t>>& per_rank) const {
  json::Object m;
  m.add("params", measured_.parameters)
      .add("grads", measured_.gradients)
      .add("optimizer", measured_.optimizer)
      .add("model_state", measured_.total());
  if (const auto p = predicted(run)) {
    m.add("model_state_predicted", p->total())
        .add("params_predicted", p->parameters)
        .add("grads_predicted", p->gradients)
        .add("optimizer_predicted", p->optimizer);
  }
  m.add("peak", step_peak_);
  json::Array ranks;
  for (size_t r = 0; r < per_rank.size(); ++r) {
    const std::vector<int64_t>& f = per_rank[r];
    if (f.size() < 5 || f[0] == 0) continue;
    json::Object one;
    one.add("rank", static_cast<int64_t>(r))
        .add("params", f[1])
        .add("grads", f[2])
        .add("optimizer", f[3])
        .add("model_state", f[1] + f[2] + f[3])
        .add("peak", f[4]);
    ranks.add_raw(one.str());
  }
  m.add("per_rank", ranks);
  return m.str();
}

}  // namespace train
}  // namespace tessera
