// ParameterServer: one server rank of asynchronous SGD (layout.h has the picture). It holds
// its shard of the flat parameters and an optimizer over it, and answers the workers'
// requests in arrival order:
//
//   pull(c) from worker w   answered with the shard once SSP allows it (ssp_clock.h); held
//                           otherwise, and answered when the slowest worker catches up.
//                           With B >= 1 the answer is the current shard (at least as fresh as
//                           SSP requires); with B = 0 it is the shard as it stood when the last
//                           push of iteration c - 1 arrived, so a worker that pulls late does
//                           not see the first pushes of its own iteration (synchronous SGD)
//   push(c) from worker w   the gradient's shard is received and applied at once: one
//                           optimizer step with learning rate lr_w / W (lr_w: the worker's;
//                           divided by tau as well with staleness_aware_lr). With B = 0 it is
//                           held until every running worker's push of iteration c is in, and
//                           the round's pushes are applied in worker order: the result does not
//                           depend on the order they arrived in (Adam and momentum step once a
//                           push, and even plain SGD's sum rounds by its order), so a
//                           synchronous run is deterministic, and resumes bit for bit
//   done from worker w      w pushes no more; it holds nobody back
//
// With shared batches (AsyncOptions::shared_batches, batch_queue.h) the servers run
// serve_epoch(e, T) once per epoch instead: server 0 hands out the epoch's T batch numbers
// with its answers to pulls, and every server returns once each worker's epoch is over. A
// worker that asks for epoch e + 1 while e is still served is answered when e + 1 starts.
//
// Checkpoints are taken between epochs, when the servers are idle: every worker has pushed its
// last gradient of the epoch and none has pulled for the next, and every push has been applied
// on every server (a push goes to all of them). A server's whole state is then its shard, its
// optimizer's state and the workers' clocks: everything else follows from them (its updates
// applied are the clocks' sum, per worker the clock; with shared batches the batches each
// worker took are its clock and the queue's position is "epoch over"; under B = 0 the round's
// snapshot is the shard). gather_optimizer_states, load_parameters and restore_clocks save and
// restore them; server_state.h puts the optimizer's state in the unsplit model's format.
//
// Every pushed gradient is applied exactly once (updates_per_worker() counts them). With plain
// SGD and bound 0 a round of W pushes is one synchronous step of the mean gradient; momentum
// and Adam run per push (the server's optimizer steps W times a round), as in asynchronous SGD.
//
//   // every rank (the same model from the same seed):
//   dist::AsyncOptions options = dist::AsyncOptions().servers(1).staleness_bound(4);
//   if (world->rank() < options.servers()) {
//     dist::ParameterServer server(model->parameters(), world, [](std::vector<Variable> p) {
//       return std::make_unique<optim::SGD>(p, optim::SGDOptions(0.1));
//     }, options);
//     server.serve_to_end();                    // until every worker said done
//     server.gather_parameters(model->parameters());
//   } else {
//     dist::AsyncWorker worker(model->parameters(), world, /*lr=*/0.1, options);
//     for (batch : batches) {
//       worker.pull();                          // the servers' current parameters
//       worker.zero_grad();
//       cross_entropy(model->forward(x), y).backward();
//       worker.step();                          // push
//     }
//     worker.finish();
//     worker.gather_parameters();               // the final model, on every rank
//   }
//
// Parameter groups with options of their own (GPT-2's AdamW decays the Linear weights and spares
// the biases, LayerNorms and embeddings): the shard is a run of the flat vector that mixes them,
// so make the server's optimizer ZeRO's dist::zero::GroupedShardOptimizer, which cuts the shard
// where the group changes and steps each piece under its group's options (every element gets
// its unsharded update; a push's learning rate goes to every group):
//
//   ParameterServerLayout layout(world->size(), options, numel);    // numel: the parameters'
//   const int64_t begin = layout.shard_offset(world->rank());
//   ParameterServer server(params, world, [&](std::vector<Variable> shard) {
//     zero::FlatShard flat{shard[0], params, zero::flat_layout(numels),
//                          {begin, begin + layout.shard_numel(world->rank())}};
//     return std::make_unique<zero::GroupedShardOptimizer>(
//         std::vector<zero::FlatShard>{flat}, groups, zero::grouped_factory<optim::AdamW>(opts));
//   }, options);
//
// Its state is still "state.0.NAME" over the shard; give unsplit_optimizer_state the groups'
// order (server_state.h) so a checkpoint numbers it as one process's AdamW over the groups does.
// (tools/train/asynchronous.cc does this for --model=gpt-*; tests/dist/async/grouped_server_test.)
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "autograd/variable.h"
#include "dist/async/batch_queue.h"
#include "dist/async/layout.h"
#include "dist/async/ssp_clock.h"
#include "dist/async/staleness.h"
#include "dist/process_group.h"
#include "optim/optimizer.h"
#include "tensor/state_dict.h"

namespace tessera {
namespace dist {

class ParameterServer {
 public:
  using OptimizerFactory =
      std::function<std::unique_ptr<optim::Optimizer>(std::vector<Variable> shard)>;

  // Collective with the workers' AsyncWorker constructors: rank 0's parameters become the
  // initial model (a broadcast), and this server keeps its shard of them. `params`: the whole
  // model's (one floating dtype). Throws unless this rank is a server of the layout.
  ParameterServer(std::vector<Variable> params, std::shared_ptr<ProcessGroup> group,
                  const OptimizerFactory& make_optimizer, AsyncOptions options);
  ~ParameterServer();

  // Serves requests until every running worker has pushed at least `clock` gradients (or has
  // finished).
  void serve_until(int64_t clock);
  // Serves requests until every worker has said done.
  void serve_to_end();
  // Shared batches: serves epoch `epoch` of `batches` batches (the same T every epoch) until
  // every running worker's epoch is over. Server 0 hands out the batch numbers.
  void serve_epoch(int64_t epoch, int64_t batches);
  // Collective (with the workers' gather_parameters): `params` become the servers' shards.
  void gather_parameters(const std::vector<Variable>& params);

  // The mean of the losses the workers reported with their pushes of iteration `clock` (0 when
  // none reported yet).
  double iteration_loss(int64_t clock) const;
  const StalenessStats& staleness() const { return stats_; }
  // Pushes applied, per worker and in total (this server's shard).
  const std::vector<int64_t>& updates_per_worker() const { return updates_per_worker_; }
  int64_t updates_applied() const { return version_; }
  // Seconds pulls were held by the bound, summed over workers.
  double held_seconds() const { return held_seconds_; }
  const Variable& shard() const { return shard_; }
  optim::Optimizer& optimizer() { return *optimizer_; }
  const ParameterServerLayout& layout() const { return layout_; }
  const SSPClock& clock() const { return clock_; }
  // Shared batches, server 0: the batches handed to each worker over the run (empty elsewhere).
  std::vector<int64_t> batches_per_worker() const;

  // Checkpoints, between epochs (the servers idle; see above). Each worker's clock: the pushes
  // of it this server applied (the same on every server then).
  std::vector<int64_t> clocks() const;
  // Collective over the servers (workers take no part): every server's optimizer state, its
  // "state.0.NAME" over its own shard, in server order, on server 0; empty on the others.
  std::vector<StateDict> gather_optimizer_states();
  // The shard becomes this server's part of `params` (the whole model's, as a checkpoint's were
  // loaded into them); so does B = 0's round snapshot, which the next pulls are answered with.
  void load_parameters(const std::vector<Variable>& params);
  // The workers' clocks, as a checkpoint saved them (AsyncWorker::restore_clock on each worker
  // restores its own): the SSP clock, the updates applied, and with shared batches (server 0)
  // the batches each worker took. Throws while a pull is outstanding or held.
  void restore_clocks(const std::vector<int64_t>& clocks);

 private:
  void serve_one();
  // Throws unless no pull is outstanding or held (and no request waits for a later epoch).
  void check_idle(const char* what) const;
  void handle(const Request& request);
  void answer_pull(int worker, int64_t clock);
  void answer_held_pulls();
  void apply_push(const Request& request);
  // One optimizer step on the shard with a pushed gradient.
  void apply(const Request& request, const Tensor& gradient, int64_t version_at_pull, int64_t lag);
  // Shared batches: the batch number for a pull (server 0 answers it; kEpochEnd ends the
  // worker's epoch, and the pull is not answered); true when the pull is to be answered.
  bool assign_batch(const Request& request);
  // B = 0: when the slowest worker's clock advances, applies the round's held pushes in worker
  // order and keeps the shard as it then stands.
  void note_round();

  std::shared_ptr<ProcessGroup> group_;
  AsyncOptions options_;
  ParameterServerLayout layout_;
  SSPClock clock_;
  Variable shard_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  Tensor request_, gradient_;
  int64_t version_ = 0;  // updates applied to this shard
  std::vector<int64_t> updates_per_worker_;
  std::vector<int64_t> version_at_pull_, lag_at_pull_;  // -1: no pull answered since the push
  std::vector<std::optional<int64_t>> held_;            // a held pull's clock, per worker
  std::vector<double> held_since_;
  double held_seconds_ = 0;
  std::map<int64_t, double> loss_sums_;  // by iteration
  StalenessStats stats_;
  std::vector<std::shared_ptr<Work>> replies_;  // sends of shard snapshots not yet completed
  std::optional<SharedBatchQueue> queue_;  // shared batches, server 0
  std::vector<int64_t> restored_taken_;    // the queue's batches per worker, until it exists
  int64_t serving_epoch_ = -1;
  int epoch_ended_ = 0;  // workers whose serving_epoch_ is over
  std::vector<Request> deferred_;  // requests for a later epoch than serving_epoch_
  Tensor round_start_;  // B = 0: the shard when the current iteration began (never written)
  // B = 0: the round's pushes received and not yet applied, per worker (W gradient shards).
  struct HeldPush {
    Request request;
    int64_t version_at_pull, lag;
  };
  std::vector<std::optional<HeldPush>> held_pushes_;
  std::vector<Tensor> held_gradients_;
  int64_t round_clock_ = 0, round_version_ = 0;
};

}  // namespace dist
}  // namespace tessera
