// Executor: plays one rank's action list (schedule.h) with autograd and real messages.
//
//   RA i   receive micro-batch i's activation; it becomes the stage input, a *leaf* that
//          requires grad, so backward leaves d loss / d input in its grad
//   F i    output = chunk(input); on the last stage output = loss_fn(output, target_i) * w_i
//   SA i   send output's tensor to the next stage (header + payload, p2p.h)
//   RG i   receive d loss / d output from the next stage
//   B i    backward({output}, {that gradient}) (the last stage: backward(weighted loss));
//          parameters' grads accumulate across micro-batches, output and its graph are freed
//   SG i   send input.grad to the previous stage, then forget the micro-batch
//   W i    (zero-bubble lists only) the weight gradients of micro-batch i: in such a list B i
//          computes only the input's gradient and queues the weight work of its Linear and
//          Conv2d layers in a WeightGradStore (autograd/weight_grad.h), holding their inputs
//          and output gradients; W i runs it, accumulating into the parameters' grads (with
//          defer_parameter_gradients, every parameter gradient of micro-batch i waits for W i)
//
//           stage s-1                 stage s                      stage s+1
//              F i ---- SA i ---> RA i  F i  SA i ------> RA i ...
//              B i <--- SG i ---- B i <------ RG i <----------- SG i ...
//
// Each micro-batch's input and output live from its F to its B (its SG): at most the
// schedule's "in flight" count at once, which is where 1F1B saves memory over GPipe. In a
// zero-bubble list B frees the graph as usual, and from B to W the micro-batch holds only what
// its weight work needs (counted apart: peak_pending_weight_bytes).
// Activation checkpointing (torchgpipe's modes) keeps even less: a checkpointed F records no
// graph, only its input; B runs the chunk's forward again (same random stream, so dropout
// masks repeat) and backpropagates through that:
//
//   always        every micro-batch checkpointed
//   except_last   all but the last (its backward comes first in GPipe, recomputing it is waste)
//   never
//
// Sends are non-blocking (the process group's send returns a Work); they are all waited for
// at the end of the list. At its start the list's receives are announced to the stage's
// Mailbox (p2p.h), which keeps the next ones posted, into buffers reused across lists. Time spent computing (F, B) is "busy"; the rest of the list's wall
// time (waiting for messages, the bubble) is idle. Activation memory is the allocator's peak
// during the list above what was allocated when it began (parameters, their grads from
// earlier batches); each list resets the device's peak (reset_peak) to measure it and raises it
// back afterwards (raise_peak), so the process-wide peak still covers every earlier list.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/variable.h"
#include "autograd/weight_grad.h"
#include "dist/process_group.h"
#include "nn/sequential.h"
#include "pipeline/microbatch.h"
#include "pipeline/p2p.h"
#include "pipeline/schedule.h"
#include "pipeline/trace.h"

namespace tessera {
namespace pipeline {

// The last stage's loss on one micro-batch: a mean over its rows (cross-entropy's default).
using LossFunction = std::function<Variable(const Variable& output, const Tensor& target)>;

enum class Checkpoint { kNever, kExceptLast, kAlways };
// "never", "except_last", "always".
Checkpoint parse_checkpoint(const std::string& name);
const char* checkpoint_name(Checkpoint mode);

struct StageStats {
  double step_seconds = 0;  // wall time of the whole action list
  double busy_seconds = 0;  // forwards and backwards (loss and recomputation included)
  int peak_in_flight = 0;   // micro-batch chunks whose activations were held at once
  int64_t peak_activation_bytes = 0;  // allocator peak during the list minus its start
  // The most held between two actions (allocator bytes minus the start): the activations the
  // schedule keeps for later backwards and the messages in flight, without the working
  // memory of a forward or backward while it runs.
  int64_t peak_held_bytes = 0;
  // Zero-bubble lists: the most bytes the pending W work held at once (layer inputs and output
  // gradients of micro-batches past B, before W), counted by the WeightGradStores.
  int64_t peak_pending_weight_bytes = 0;
  double idle_fraction() const { return step_seconds > 0 ? 1.0 - busy_seconds / step_seconds : 0; }
};

class StageExecutor {
 public:
  // chunks[c] is this rank's model chunk c, virtual stage c*K + rank of `group` (K = group
  // size). The group's ranks are the stages, in order.
  StageExecutor(std::vector<std::shared_ptr<nn::Sequential>> chunks,
                std::shared_ptr<dist::ProcessGroup> group, LossFunction loss,
                Checkpoint checkpoint = Checkpoint::kNever);

  // Runs one batch's actions. Returns the sum of the weighted micro-batch losses computed on
  // this rank: the batch loss on the rank holding the last virtual stage, 0 elsewhere.
  double run(const std::vector<Action>& actions, const std::vector<Microbatch>& microbatches);

  // Runs a forward-only list (forward_only() in schedule.h) without recording a graph.
  // Returns the last virtual stage's outputs, one per micro-batch, on the rank that holds it
  // (empty elsewhere).
  std::vector<Tensor> run_forward(const std::vector<Action>& actions,
                                  const std::vector<Microbatch>& microbatches);

  // Split lists: B holds every parameter gradient of its micro-batch for W, not only the split
  // layers' (WeightGradStore's defer_leaves), so that W i delivers all of micro-batch i's
  // parameter gradients as one backward. A data-parallel wrapper that reduces each backward's
  // gradients once each as they arrive (ZeRO-2's buckets) needs it: otherwise LayerNorm's and
  // the embedding's gradients arrive in B i, the Linear weights' in W i, and B i+1 (which a
  // zero-bubble schedule runs before W i) would bring a second gradient into the same
  // reduction. Off by default: the B gradients then accumulate at once, holding no memory
  // until W.
  void defer_parameter_gradients(bool on) { defer_parameter_gradients_ = on; }

  const StageStats& stats() const { return stats_; }
  // Every action of the last list with its start and end (trace.h).
  const std::vector<Span>& spans() const { return spans_; }

 private:
  struct InFlight {
    Variable input;      // leaf (requires grad unless this is virtual stage 0)
    Variable output;     // the chunk's output, or the weighted loss on the last stage
    Tensor output_grad;  // received from the next stage
  };
  int virtual_stage(int chunk) const { return chunk * stages_ + rank_; }
  bool first(int chunk) const { return virtual_stage(chunk) == 0; }
  bool last(int chunk) const { return virtual_stage(chunk) == stages_ * num_chunks() - 1; }
  int num_chunks() const { return static_cast<int>(chunks_.size()); }
  int next_rank() const { return (rank_ + 1) % stages_; }
  int previous_rank() const { return (rank_ + stages_ - 1) % stages_; }
  InFlight& slot(const Action& a);
  // Where this rank's chunks live: their first parameter's device, else the CPU.
  Device device() const;
  // Plays a list (training, or evaluation collecting the last stage's outputs), timing each
  // action and measuring activation memory.
  double play(const std::vector<Action>& actions, const std::vector<Microbatch>& microbatches,
              bool train, std::vector<Tensor>* outputs);
  // Announces the list's receives to the mailbox, which posts the first of them.
  void expect_messages(const std::vector<Action>& actions);
  // One method per action kind.
  void receive_activation(const Action& a);
  void forward(const Action& a);
  void send_activation(const Action& a);
  void receive_gradient(const Action& a);
  void backward_step(const Action& a);
  void send_gradient(const Action& a);
  void weight_step(const Action& a);
  void release_completed_sends();

  // What one play() works on.
  struct Run {
    const std::vector<Microbatch>* microbatches = nullptr;
    bool train = true;
    std::vector<Tensor>* outputs = nullptr;  // evaluation: the last stage's outputs
    Device device = Device::cpu();           // the chunks' parameters' (messages land there)
    bool split = false;                      // the list has W actions: B defers weight work
    int forwarded = 0;                       // forwarded, not yet backwarded
    double loss_sum = 0;
    std::vector<std::shared_ptr<dist::Work>> sends;  // not yet known to be done
  };

  std::vector<std::shared_ptr<nn::Sequential>> chunks_;
  std::shared_ptr<dist::ProcessGroup> group_;
  Mailbox mailbox_;  // this stage's messages and their receive buffers, kept across lists
  LossFunction loss_;
  Checkpoint checkpoint_;
  bool defer_parameter_gradients_ = false;
  int stages_, rank_;
  std::map<std::pair<int, int>, InFlight> in_flight_;  // (chunk, micro-batch)
  // Split lists: each backwarded micro-batch's weight work until its W (chunk, micro-batch).
  std::map<std::pair<int, int>, std::unique_ptr<WeightGradStore>> pending_weights_;
  Run run_;
  StageStats stats_;
  std::vector<Span> spans_;
};

}  // namespace pipeline
}  // namespace tessera
