// ModelAverager: what runs after every optimizer step of local SGD (PyTorch's
// torch.distributed.algorithms.model_averaging.averagers.ModelAverager), and the schedule its
// two kinds here share: PeriodicModelAverager (local SGD, post-local SGD: Lin et al. 2020,
// "Don't Use Large Mini-Batches, Use Local SGD") and DiLoCo (Douillard et al. 2023).
//
// The schedule. The first `warmup_steps` optimizer steps are plain DDP steps (gradients
// all-reduced during backward, every replica takes the same step); after them, rounds of H
// (`period`) local steps, each ending in one communication of the whole model:
//
//   optimizer step k:  0    1    2    3    4    5    6    7    8    9    10   ...   W = 2, H = 4
//   gradients:         AR   AR   .    .    .    .    .    .    .    .    .         AR: DDP
//   models:            .    .    .    .    .    AV   .    .    .    AV   .         AV: averaged
//                      warm-up  '---- round 1 ---'  '---- round 2 ---'
//
//   communicates_after(k, H, W)  =  k >= W  and  (k - W + 1) % H == 0
//
// PyTorch's PeriodicModelAverager averages when (k - W) % H == 0 instead: right after the first
// local step, then every H steps (with W = 0: after steps 0, 4, 8, ...). Here every round has H
// local steps, as in Lin et al.'s local SGD and as DiLoCo's rounds of H inner steps (with W = 0:
// after steps 3, 7, 11, ...); with H = 1 both average after every step.
//
// Warm-up, as a PyTorch user runs it: the model stays wrapped in DistributedDataParallel, and
// the warm-up steps' forwards go through the wrapper (which all-reduces their gradients), the
// later ones through the model itself (local gradients, no communication):
//
//   Variable out = opt.in_warmup() ? ddp.forward(x) : model->forward(x);
//
// (PyTorch makes the DDP wrapper silent after warm-up with its post_localSGD_hook. tessera's
// DDP divides whatever its hook returns by the world size, so a silent hook would have to
// multiply local gradients by N and lose their last bit when N is not a power of two; calling
// the model itself gives the local gradient exactly, and DDP ignores a backward whose forward
// it did not run.) The averager itself never communicates during warm-up.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "autograd/variable.h"
#include "dist/process_group.h"
#include "tensor/state_dict.h"

namespace tessera {
namespace dist {

// True when optimizer step `step` (0-based) ends a round: the schedule drawn above. Checks
// period >= 1 and warmup_steps >= 0.
bool communicates_after(int64_t step, int64_t period, int64_t warmup_steps);

// Collective. Every floating-point tensor of `params` and `buffers` becomes its mean over the
// group: one all-reduce (ReduceOp::kMean) of one flat buffer per dtype (dist/local_sgd/
// flat_tensors.h), so psi + (buffer elements) elements in all. Integer buffers (BatchNorm's
// num_batches_tracked, equal on ranks that took the same steps) are left as they are. When
// `consensus_distance` is given it receives Xi^2 = 1/N sum_i ||w_i - w_bar||^2 of `params`
// measured before averaging (buffers not counted), for one more all-reduce of an f64 scalar.
void average_parameters(const std::vector<Variable>& params, const std::vector<Variable>& buffers,
                        ProcessGroup& group, double* consensus_distance = nullptr);

class ModelAverager {
 public:
  virtual ~ModelAverager() = default;
  ModelAverager(const ModelAverager&) = delete;
  ModelAverager& operator=(const ModelAverager&) = delete;

  virtual std::string name() const = 0;
  // Called after every optimizer step (PostLocalSGDOptimizer::step does), with the same
  // parameters and buffers each time, listed in the same order on every rank. Communicates
  // when the schedule says so, and returns whether it did; counts the step either way.
  virtual bool average(const std::vector<Variable>& params,
                       const std::vector<Variable>& buffers = {}) = 0;

  int64_t step() const { return step_; }  // optimizer steps counted so far
  int64_t period() const { return period_; }
  int64_t warmup_steps() const { return warmup_steps_; }
  // True while the next optimizer step is a warm-up step: run its forward through DDP.
  bool in_warmup() const { return step_ < warmup_steps_; }
  // Xi^2 measured before the last communication (when the options ask for it); NaN before.
  double consensus_distance() const { return consensus_distance_; }
  ProcessGroup& group() const { return *group_; }

  // "step" (i64), and what a derived averager keeps (DiLoCo: the global model and the outer
  // optimizer). load_state_dict checks every key before changing anything.
  virtual StateDict state_dict() const;
  virtual void load_state_dict(const StateDict& state);
  // Bytes this averager holds beyond the model (DiLoCo's global copy and outer state).
  virtual int64_t state_bytes() const { return 0; }

 protected:
  // Checks the options, naming `who`, the option (`period_name`: "period", "inner_steps") and
  // the values.
  ModelAverager(std::shared_ptr<ProcessGroup> group, int64_t period, int64_t warmup_steps,
                bool measure_consensus_distance, const std::string& who,
                const std::string& period_name);
  // Does the step being counted now end a round?
  bool communicates_now() const { return communicates_after(step_, period_, warmup_steps_); }
  void count_step() { ++step_; }
  void set_step(int64_t step) { step_ = step; }
  bool measures_consensus_distance() const { return measure_; }
  void set_consensus_distance(double xi2) { consensus_distance_ = xi2; }
  const std::shared_ptr<ProcessGroup>& group_ptr() const { return group_; }
  // The "step" entry of `state`, checked; `allowed` says which other keys may be present
  // (a key is allowed when it equals one of them or starts with one that ends in '.').
  int64_t read_step(const StateDict& state, const std::vector<std::string>& allowed) const;

 private:
  std::shared_ptr<ProcessGroup> group_;
  int64_t period_, warmup_steps_;
  bool measure_;
  std::string who_;
  int64_t step_ = 0;
  double consensus_distance_;
};

}  // namespace dist
}  // namespace tessera
