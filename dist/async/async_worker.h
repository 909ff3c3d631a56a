// AsyncWorker: one worker rank of asynchronous SGD (layout.h has the picture,
// parameter_server.h an example). An optim::Optimizer whose step() pushes the gradients to the
// servers instead of updating anything here, so schedules set its learning rate (which travels
// with each push) and the training loop steps it as any optimizer:
//
//   pull()    asks every server for its shard and writes the answers into the parameters
//             (blocks while SSP holds the pull: this worker is B iterations ahead)
//   forward, backward
//   step()    sends each server its part of the gradients, with the learning rate and the
//             loss given to set_loss(); returns once they are posted
//   finish()  tells the servers this worker is done
//
// With shared batches (AsyncOptions::shared_batches) pull_batch(epoch) replaces pull(): it
// also returns which of the epoch's batches to train on, or SharedBatchQueue::kEpochEnd (no
// pull then: the epoch is over for this worker).
//
// A pull must come before each step (the servers check it too).
#pragma once

#include <memory>
#include <vector>

#include "dist/async/layout.h"
#include "dist/process_group.h"
#include "dist/work.h"
#include "optim/optimizer.h"

namespace tessera {
namespace dist {

class AsyncWorker : public optim::Optimizer {
 public:
  // Collective with the servers' ParameterServer constructors (a broadcast of rank 0's
  // parameters). `params`: the whole model's (one floating dtype); lr: the learning rate
  // pushed with the gradients (a schedule may change it). Throws unless this rank is a worker.
  AsyncWorker(std::vector<Variable> params, std::shared_ptr<ProcessGroup> group, double lr,
              AsyncOptions options);
  ~AsyncWorker() override;

  void pull();
  // Shared batches: pull() with the next batch number of `epoch` from server 0's queue; on
  // kEpochEnd nothing is pulled (pulled() stays false).
  int64_t pull_batch(int64_t epoch);
  // The loss reported with the next push (the servers' mean loss per iteration).
  void set_loss(double loss) { loss_ = loss; }
  // Pushes the gradients (a parameter without one pushes zeros).
  void step() override;
  void finish();
  // Collective (with the servers' gather_parameters): the parameters become the servers'.
  void gather_parameters();

  // Pushes made so far: the next iteration's number.
  int64_t clock() const { return clock_; }
  // Resuming from a checkpoint: the pushes this worker had made (the servers' clocks restored to
  // the same, ParameterServer::restore_clocks). Not between a pull and its push.
  void restore_clock(int64_t clock);
  bool pulled() const { return pulled_; }
  // Seconds spent in pull() (messages and the bound's holds).
  double pull_seconds() const { return pull_seconds_; }
  int worker() const { return worker_; }
  const ParameterServerLayout& layout() const { return layout_; }

  // Refused: the parameters are fixed at construction.
  void add_param_group(optim::ParamGroup group) override;
  // The group options (the learning rate); a worker holds no other state.
  StateDict state_dict() const override;
  void load_state_dict(const StateDict& state) override;
  int64_t state_bytes() const override { return 0; }

 private:
  void wait_for_sends();
  // Sends `message` (the pull) to every server from `first_server` on and receives their shards
  // (posted before the requests); the parameters become the pulled ones.
  void receive_shards(const Tensor& message, int first_server);
  std::shared_ptr<ProcessGroup> group_;
  ParameterServerLayout layout_;
  int worker_;
  std::vector<Variable> params_;
  Tensor flat_, gradients_;
  std::vector<std::shared_ptr<Work>> sends_;
  AsyncOptions options_;
  int64_t clock_ = 0;
  bool pulled_ = false, finished_ = false;
  double loss_ = 0, pull_seconds_ = 0;
};

}  // namespace dist
}  // namespace tessera
