#include "pipeline/executor.h"

#include <algorithm>
#include <optional>

#include "autograd/checkpoint.h"
#include "autograd/engine.h"
#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "dist/work.h"
#include "pipeline/p2p.h"
#include "tensor/allocator.h"
#include "tensor/check.h"

namespace tessera {
namespace pipeline {
namespace {

// The chunk's forward for checkpoint(): called once in F and again in B to recompute. The
// second call must not count the micro-batch twice in BatchNorm's running statistics, so the
// chunk's buffers are put back as they were after it (the output is the same either way: in
// training BatchNorm normalizes with the micro-batch's own statistics).
std::function<Variable(const Variable&)> recomputable(std::shared_ptr<nn::Sequential> chunk) {
  auto calls = std::make_shared<int>(0);
  return [chunk, calls](const Variable& x) {
    if ((*calls)++ == 0) return chunk->forward(x);
    std::vector<std::pair<Variable, Tensor>> saved;
    for (const Variable& b : chunk->buffers()) saved.push_back({b, b.data().clone()});
    Variable y = chunk->forward(x);
    for (auto& [b, data] : saved) Tensor(b.data()).copy_(data);
    return y;
  };
}

// Measures one list's allocator peak without losing the process's: the device's peak is reset
// at the list's start (so the list's own peak can be read however high earlier ones were) and
// raised back to its earlier value at the end, also when the list throws. A caller measuring
// around several lists (a step, a run) still reads the highest of them.
class ListPeak {
 public:
  explicit ListPeak(Device device) : device_(device), outer_peak_(memory_stats(device).peak_bytes) {
    reset_peak(device_);
  }
  ~ListPeak() { raise_peak(device_, outer_peak_); }
  ListPeak(const ListPeak&) = delete;
  ListPeak& operator=(const ListPeak&) = delete;
  // The most allocated at once since the list began.
  int64_t bytes() const { return memory_stats(device_).peak_bytes; }

 private:
  Device device_;
  int64_t outer_peak_;
};

}  // namespace

Checkpoint parse_checkpoint(const std::string& name) {
  if (name == "never") return Checkpoint::kNever;
  if (name == "except_last") return Checkpoint::kExceptLast;
  if (name == "always") return Checkpoint::kAlways;
  TS_FAIL("activation checkpointing '", name, "' is not one of always, except_last, never");
}

const char* checkpoint_name(Checkpoint mode) {
  switch (mode) {
    case Checkpoint::kNever: return "never";
    case Checkpoint::kExceptLast: return "except_last";
    case Checkpoint::kAlways: return "always";
  }
  return "?";
}

StageExecutor::StageExecutor(std::vector<std::shared_ptr<nn::Sequential>> chunks,
                             std::shared_ptr<dist::ProcessGroup> group, LossFunction loss,
                             Checkpoint checkpoint)
    : chunks_(std::move(chunks)), group_(std::move(group)), mailbox_(group_),
      loss_(std::move(loss)), checkpoint_(checkpoint) {
  TS_CHECK(group_ != nullptr, "StageExecutor: no process group");
  TS_CHECK(!chunks_.empty(), "StageExecutor: no model chunks");
  TS_CHECK(loss_ != nullptr, "StageExecutor: no loss function");
  stages_ = group_->size();
  rank_ = group_->rank();
}

StageExecutor::InFlight& StageExecutor::slot(const Action& a) {
  auto it = in_flight_.find({a.chunk, a.microbatch});
  TS_CHECK(it != in_flight_.end(), "StageExecutor: ", to_string(a, num_chunks() > 1),
           " on rank ", rank_, " has no forward state (the action list is out of order)");
  return it->second;
}

Device StageExecutor::device() const {
  for (const auto& chunk : chunks_) {
    for (const Variable& p : chunk->parameters()) return p.device();
  }
  return Device::cpu();
}

double StageExecutor::run(const std::vector<Action>& actions,
                          const std::vector<Microbatch>& microbatches) {
  return play(actions, microbatches, /*train=*/true, nullptr);
}

std::vector<Tensor> StageExecutor::run_forward(const std::vector<Action>& actions,
                                               const std::vector<Microbatch>& microbatches) {
  NoGradGuard no_grad;
  std::vector<Tensor> outputs;
  play(actions, microbatches, /*train=*/false, &outputs);
  return outputs;
}

double StageExecutor::play(const std::vector<Action>& actions,
                           const std::vector<Microbatch>& microbatches, bool train,
                           std::vector<Tensor>* outputs) {
  const int M = static_cast<int>(microbatches.size());
  const Device dev = device();
  run_ = Run{&microbatches, train, outputs, dev};
  run_.split = std::any_of(actions.begin(), actions.end(),
                           [](const Action& a) { return a.kind == ActionKind::kWeight; });
  in_flight_.clear();
  pending_weights_.clear();
  stats_ = {};
  spans_.clear();
  if (outputs) outputs->assign(M, Tensor());
  expect_messages(actions);
  const int64_t base_bytes = memory_stats(dev).current_bytes;
  const ListPeak list_peak(dev);
  const double start = dist::steady_seconds();
  for (const Action& a : actions) {
    TS_CHECK(a.microbatch >= 0 && a.microbatch < M && a.chunk >= 0 && a.chunk < num_chunks(),
             "StageExecutor: ", to_string(a, true), " on rank ", rank_, " is out of range for ",
             M, " micro-batches and ", num_chunks(), " chunks");
    TS_CHECK(train || a.kind == ActionKind::kForward || a.kind == ActionKind::kRecvActivation ||
                 a.kind == ActionKind::kSendActivation,
             "StageExecutor: ", to_string(a, true), " in a forward-only list");
    const double t0 = dist::steady_seconds();
    switch (a.kind) {
      case ActionKind::kRecvActivation: receive_activation(a); break;
      case ActionKind::kForward: forward(a); break;
      case ActionKind::kSendActivation: send_activation(a); break;
      case ActionKind::kRecvGradient: receive_gradient(a); break;
      case ActionKind::kBackward: backward_step(a); break;
      case ActionKind::kSendGradient: send_gradient(a); break;
      case ActionKind::kWeight: weight_step(a); break;
    }
    spans_.push_back({a, false, t0, dist::steady_seconds()});
    if (is_compute(a.kind)) stats_.busy_seconds += spans_.back().end - t0;
    release_completed_sends();
    stats_.peak_held_bytes =
        std::max(stats_.peak_held_bytes, memory_stats(dev).current_bytes - base_bytes);
    int64_t pending = 0;
    for (const auto& [key, store] : pending_weights_) pending += store->held_bytes();
    stats_.peak_pending_weight_bytes = std::max(stats_.peak_pending_weight_bytes, pending);
  }
  for (auto& w : run_.sends) w->wait();
  stats_.step_seconds = dist::steady_seconds() - start;
  stats_.peak_activation_bytes = list_peak.bytes() - base_bytes;
  TS_CHECK(in_flight_.empty(), "StageExecutor: rank ", rank_, " ends the batch with ",
           in_flight_.size(), " micro-batches not backwarded");
  TS_CHECK(pending_weights_.empty(), "StageExecutor: rank ", rank_, " ends the batch with ",
           pending_weights_.size(), " micro-batches' weight gradients not computed (no W)");
  return run_.loss_sum;
}

void StageExecutor::release_completed_sends() {
  // A send holds its tensor until it is known to be done; without this, every output sent
  // would stay allocated until the end of the list, after its backward had dropped it.
  auto& sends = run_.sends;
  sends.erase(std::remove_if(sends.begin(), sends.end(),
                             [](const std::shared_ptr<dist::Work>& w) {
                               if (!w->is_completed()) return false;
                               w->wait();  // done: rethrows its error, if any
                               return true;
                             }),
              sends.end());
}

void StageExecutor::expect_messages(const std::vector<Action>& actions) {
  int activations = 0, gradients = 0;
  for (const Action& a : actions) {
    activations += a.kind == ActionKind::kRecvActivation;
    gradients += a.kind == ActionKind::kRecvGradient;
  }
  // Posts the first receives now: the stage's first input may arrive before it asks for it.
  if (activations) mailbox_.expect(previous_rank(), MessageKind::kActivation, activations);
  if (gradients) mailbox_.expect(next_rank(), MessageKind::kGradient, gradients);
}

void StageExecutor::receive_activation(const Action& a) {
  const Tensor x = mailbox_.recv_tensor(previous_rank(), MessageKind::kActivation, a.microbatch,
                                        virtual_stage(a.chunk) - 1, run_.device);
  // Every stage cuts the same batch the same way: a micro-batch of another size means the
  // ranks were given different batches (said here, before a loss or a layer fails on it).
  const std::vector<Microbatch>& mbs = *run_.microbatches;
  const int64_t mine = mbs[a.microbatch].input.size(0);
  if (x.dim() == 0 || x.size(0) != mine) {
    int64_t rows = 0;
    for (const Microbatch& m : mbs) rows += m.input.size(0);
    TS_FAIL("pipeline: rank ", rank_, " (virtual stage ", virtual_stage(a.chunk),
            ") received micro-batch ", a.microbatch, " with ", x.dim() ? x.size(0) : 0,
            " rows from rank ", previous_rank(), ", but its own batch of ", rows, " rows in ",
            mbs.size(), " micro-batches makes it ", mine, " rows: the stages were given "
            "different batches (every rank of a pipeline must pass the same batch to "
            "Pipe::train_step)");
  }
  // A leaf, so backward leaves the gradient to send back in its grad.
  in_flight_[{a.chunk, a.microbatch}].input = Variable(x, /*requires_grad=*/run_.train);
}

void StageExecutor::forward(const Action& a) {
  InFlight& f = in_flight_[{a.chunk, a.microbatch}];
  const Microbatch& mb = (*run_.microbatches)[a.microbatch];
  const int M = static_cast<int>(run_.microbatches->size());
  if (first(a.chunk)) f.input = Variable(mb.input);
  TS_CHECK(f.input.defined(), "StageExecutor: F", a.microbatch, " on rank ", rank_,
           " before its activation arrived");
  const auto& chunk = chunks_[a.chunk];
  const bool recompute = run_.train && (checkpoint_ == Checkpoint::kAlways ||
                                        (checkpoint_ == Checkpoint::kExceptLast && a.microbatch < M - 1));
  f.output = recompute ? checkpoint(recomputable(chunk), f.input) : chunk->forward(f.input);
  stats_.peak_in_flight = std::max(stats_.peak_in_flight, ++run_.forwarded);
  if (!run_.train) {
    --run_.forwarded;  // evaluation keeps nothing for a backward
    if (last(a.chunk)) {
      (*run_.outputs)[a.microbatch] = f.output.data();
      in_flight_.erase({a.chunk, a.microbatch});
    }
  } else if (last(a.chunk)) {
    // The one gradient-scaling rule: weight by the micro-batch's share of the batch.
    f.output = loss_(f.output, mb.target) * mb.weight;
    run_.loss_sum += f.output.item();
  }
}

void StageExecutor::send_activation(const Action& a) {
  auto works = mailbox_.send_tensor(slot(a).output.data(), next_rank(), MessageKind::kActivation,
                                    a.microbatch, virtual_stage(a.chunk));
  run_.sends.insert(run_.sends.end(), works.begin(), works.end());
  if (!run_.train) in_flight_.erase({a.chunk, a.microbatch});
}

void StageExecutor::receive_gradient(const Action& a) {
  InFlight& f = slot(a);
  // The gradient of this stage's output: its shape and dtype are known.
  const ExpectedTensor expected{f.output.shape(), f.output.dtype()};
  f.output_grad = mailbox_.recv_tensor(next_rank(), MessageKind::kGradient, a.microbatch,
                                       virtual_stage(a.chunk) + 1, run_.device, &expected);
}

void StageExecutor::backward_step(const Action& a) {
  InFlight& f = slot(a);
  // A split list's B: the layers queue their weight work for this micro-batch's W.
  std::unique_ptr<WeightGradStore> weights;
  std::optional<DeferWeightGradients> defer;
  if (run_.split) {
    weights = std::make_unique<WeightGradStore>();
    if (defer_parameter_gradients_) weights->defer_leaves(chunks_[a.chunk]->parameters());
    defer.emplace(*weights);
  }
  if (!f.output.requires_grad()) {
    // Nothing here to differentiate: a first chunk without parameters (Flatten).
  } else if (last(a.chunk)) {
    backward({f.output});
  } else {
    TS_CHECK(f.output_grad.defined(), "StageExecutor: B", a.microbatch, " on rank ", rank_,
             " before its output gradient arrived");
    TS_CHECK(f.output_grad.shape() == f.output.shape(), "StageExecutor: B", a.microbatch,
             " on rank ", rank_, ": received a gradient of shape ", f.output_grad.shape(),
             " for an output of shape ", f.output.shape());
    backward({f.output}, {f.output_grad});
  }
  defer.reset();
  // The graph is gone (backward frees it); drop this micro-batch's activations now.
  f.output = Variable();
  f.output_grad = Tensor();
  if (first(a.chunk)) in_flight_.erase({a.chunk, a.microbatch});
  if (weights) pending_weights_[{a.chunk, a.microbatch}] = std::move(weights);  // until its W
  --run_.forwarded;
}

void StageExecutor::weight_step(const Action& a) {
  TS_CHECK(run_.split, "StageExecutor: W", a.microbatch, " on rank ", rank_,
           " in a list without split backwards");
  const auto it = pending_weights_.find({a.chunk, a.microbatch});
  TS_CHECK(it != pending_weights_.end(), "StageExecutor: W", a.microbatch, " on rank ", rank_,
           " before its B (the action list is out of order)");
  it->second->run();  // accumulates into the parameters' grads
  pending_weights_.erase(it);
}

void StageExecutor::send_gradient(const Action& a) {
  InFlight& f = slot(a);
  // An input the chunk ignores has no gradient: it is zero.
  const Tensor g = f.input.grad().defined() ? f.input.grad() : zeros_like(f.input.data());
  auto works = mailbox_.send_tensor(g, previous_rank(), MessageKind::kGradient, a.microbatch,
                                    virtual_stage(a.chunk));
  run_.sends.insert(run_.sends.end(), works.begin(), works.end());
  in_flight_.erase({a.chunk, a.microbatch});
}

}  // namespace pipeline
}  // namespace tessera
