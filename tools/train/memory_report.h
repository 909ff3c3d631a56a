// The final JSON line's "memory" object: this rank's model states (parameters, gradients,
// optimizer state) right after a backward and before the optimizer step, measured
// (dist::zero::measured_model_state) beside the ZeRO paper's prediction for this model, dtype,
// optimizer, strategy and world size (dist::zero::predicted_model_state), and the allocator's
// peak during that step:
//
//   "memory": {"params": P, "grads": G, "optimizer": O, "model_state": P+G+O,
//              "model_state_predicted": X, "peak": B,
//              "per_rank": [{"rank": 0, "params": ..., "grads": ..., "optimizer": ...,
//                            "model_state": ..., "peak": ...}, ...]}
//
// The top-level figures are this rank's (rank 0's in the JSON); "per_rank" has every rank's
// (a rank that never measured, a parameter server of --batch-assignment=shared, is left out).
// Taken once, on the first step after the optimizer has stepped (its first step creates its
// state; with loss scaling the first steps may be skipped). Pipelines and tensor-parallel runs
// report the measured figures without a prediction.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "dist/zero/memory_model.h"
#include "tools/train/context.h"

namespace tessera {
namespace train {

// The final JSON's "comm_bytes_per_step_theory", beside the byte ledger's "comm_bytes_per_step"
// (rank 0): the strategy's gradient and parameter traffic (dist::zero::predicted_comm_bytes:
// 2 (N-1)/N of the reduced bytes for DDP and ZeRO-1/2, 3 (N-1)/N for ZeRO-3) plus the one-element
// all-reduces every step makes: the NaN guard's f64 flag, and under loss scaling the scaler's
// f32 found_inf (a ring over one element sends it once from rank 0). None for one process,
// pipelines and tensor parallelism (their messages depend on the activations' shapes).
std::optional<int64_t> predicted_comm_bytes_per_step(const RunContext& run);

class MemoryReport {
 public:
  // Whether the step about to run is the one measured.
  bool measures() const { return !taken_ && optimizer_stepped_; }
  // After every step: whether the optimizer stepped (false when the loss scaler skipped it).
  void stepped(bool optimizer_stepped) { optimizer_stepped_ = optimizer_stepped_ || optimizer_stepped; }
  // Around that step: before it (resets the allocator's peak, keeping the run's peak so far),
  // after its backward, and after the optimizer step (the step's peak).
  void before_step(const RunContext& run);
  void after_backward(const RunContext& run);
  void after_step(const RunContext& run);

  bool taken() const { return taken_; }
  // The run's peak so far when the measured step began (the allocator's own peak restarts then).
  int64_t peak_before() const { return peak_before_; }
  // {taken (0/1), params, grads, optimizer, peak}: what every rank sends for "per_rank".
  std::vector<int64_t> figures() const;
  // {"params": ..., ...}; "model_state_predicted" only where a formula applies; `per_rank`:
  // every rank's figures(), in rank order.
  std::string json(const RunContext& run, const std::vector<std::vector<int64_t>>& per_rank) const;

 private:
  bool taken_ = false, optimizer_stepped_ = false;
  int64_t peak_before_ = 0, step_peak_ = 0;
  dist::zero::ModelStateBytes measured_;
};

}  // namespace train
}  // namespace tessera
