#include "dist/async/parameter_server.h"

#include <algorithm>
#include <climits>

#include "autograd/grad_mode.h"
#include "dist/module_sync.h"
#include "dist/work.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {

namespace {

int64_t numel_of(const std::vector<Variable>& params) {
  int64_t n = 0;
  for (const Variable& p : params) n += p.numel();
  return n;
}

}  // namespace

ParameterServer::ParameterServer(std::vector<Variable> params, std::shared_ptr<ProcessGroup> group,
                                 const OptimizerFactory& make_optimizer, AsyncOptions options)
    : group_(std::move(group)),
      options_(options),
      layout_(group_ ? group_->size() : 0, options, numel_of(params)),
      clock_(layout_.workers(), options.staleness_bound()),
      updates_per_worker_(layout_.workers(), 0),
      version_at_pull_(layout_.workers(), -1),
      lag_at_pull_(layout_.workers(), 0),
      held_(layout_.workers()),
      held_since_(layout_.workers(), 0),
      held_pushes_(layout_.workers()),
      held_gradients_(layout_.workers()) {
  const DType dtype = flat_dtype(params, "ParameterServer");
  const int me = group_->rank();
  TS_CHECK(layout_.is_server(me), "ParameterServer on rank ", me, ", but the servers are ranks 0..",
           layout_.servers() - 1, " (ranks ", layout_.servers(), "..", group_->size() - 1,
           " are workers: AsyncWorker)");
  broadcast_parameters(params, *group_, 0);
  NoGradGuard no_grad;
  shard_ = Variable(flatten(params).narrow(0, layout_.shard_offset(me), layout_.shard_numel(me))
                        .clone(),
                    /*requires_grad=*/true);
  shard_.set_name("parameter_server.shard." + std::to_string(me));
  optimizer_ = make_optimizer({shard_});
  TS_CHECK(optimizer_ != nullptr, "ParameterServer: the optimizer factory returned null");
  round_start_ = shard_.data().clone();
  request_ = empty({Request::kElements}, kF64);
  gradient_ = empty({shard_.numel()}, TensorOptions(dtype).device(shard_.device()));
}

ParameterServer::~ParameterServer() {
  // Sends still in flight read their snapshots: let them finish (not on an error's unwinding,
  // where the job is ending anyway).
  if (std::uncaught_exceptions() == 0) {
    for (const auto& r : replies_) r->wait();
  }
}

void ParameterServer::serve_until(int64_t clock) {
  while (clock_.slowest() < clock) serve_one();
}

void ParameterServer::serve_to_end() {
  while (!clock_.all_finished()) serve_one();
  for (const auto& r : replies_) r->wait();
  replies_.clear();
}

void ParameterServer::serve_epoch(int64_t epoch, int64_t batches) {
  TS_CHECK(options_.shared_batches(), "ParameterServer::serve_epoch needs shared batches "
           "(AsyncOptions::shared_batches); without them serve_until serves the iterations");
  TS_CHECK(epoch > serving_epoch_, "ParameterServer::serve_epoch(", epoch, ") after epoch ",
           serving_epoch_);
  if (group_->rank() == 0) {
    if (!queue_) {
      queue_.emplace(batches, layout_.workers());
      if (!restored_taken_.empty()) queue_->restore_batches_per_worker(restored_taken_);
    }
    TS_CHECK(queue_->batches_per_epoch() == batches, "ParameterServer::serve_epoch: ", batches,
             " batches in epoch ", epoch, ", but ", queue_->batches_per_epoch(), " before");
  }
  serving_epoch_ = epoch;
  epoch_ended_ = 0;
  std::vector<Request> early;
  early.swap(deferred_);
  for (const Request& r : early) {
    if (r.epoch == epoch) {
      handle(r);
    } else {
      deferred_.push_back(r);  // a later epoch still (the checks in handle() catch an earlier)
    }
  }
  auto running = [this] {
    int n = 0;
    for (int w = 0; w < layout_.workers(); ++w) n += clock_.is_finished(w) ? 0 : 1;
    return n;
  };
  while (epoch_ended_ < running()) serve_one();
}

std::vector<int64_t> ParameterServer::batches_per_worker() const {
  return queue_ ? queue_->batches_per_worker() : std::vector<int64_t>();
}

bool ParameterServer::assign_batch(const Request& r) {
  TS_CHECK(r.epoch == serving_epoch_, "parameter server ", group_->rank(), ": worker ", r.worker,
           " pulls for epoch ", r.epoch, " while epoch ", serving_epoch_,
           " is served (the ranks disagree on the epoch)");
  if (group_->rank() != 0) return true;  // the worker has its batch from server 0
  const int64_t batch = queue_->next(r.worker, r.epoch);
  const Tensor answer = from_vector<int64_t>({batch}, {1});
  replies_.push_back(group_->send(answer, layout_.worker_rank(r.worker), kAssignmentTag));
  if (batch != SharedBatchQueue::kEpochEnd) return true;
  // The shard goes with "epoch over" too (not a pull: no iteration starts), so that the worker
  // can post its receive with the request, before the answer says which one it is: a large
  // message that finds no receive posted would hold this server's sends to everyone else.
  replies_.push_back(group_->send(shard_.data().clone(), layout_.worker_rank(r.worker),
                                  kParametersTag));
  ++epoch_ended_;
  return false;
}

std::vector<int64_t> ParameterServer::clocks() const {
  std::vector<int64_t> out;
  for (int w = 0; w < layout_.workers(); ++w) out.push_back(clock_.clock(w));
  return out;
}

void ParameterServer::check_idle(const char* what) const {
  for (int w = 0; w < layout_.workers(); ++w) {
    TS_CHECK(version_at_pull_[w] < 0 && !held_[w], "ParameterServer::", what, " on server ",
             group_->rank(), " while worker ", w, "'s pull for iteration ", clock_.clock(w),
             " is ", held_[w] ? "held" : "answered and its push not yet applied",
             " (checkpoints are taken between epochs, the servers idle)");
  }
  for (int w = 0; w < layout_.workers(); ++w) {
    TS_CHECK(!held_pushes_[w], "ParameterServer::", what, " on server ", group_->rank(),
             " while worker ", w, "'s push of iteration ", held_pushes_[w]->request.clock,
             " waits for the round's others");
  }
  TS_CHECK(deferred_.empty(), "ParameterServer::", what, " on server ", group_->rank(), " with ",
           deferred_.size(), " requests for a later epoch waiting");
}

std::vector<StateDict> ParameterServer::gather_optimizer_states() {
  check_idle("gather_optimizer_states");
  // Every push went to every server, so all have stepped alike: the same keys, in the same
  // order, the step count a scalar and every other tensor one element per shard element.
  const StateDict mine = optimizer_->state_dict();
  const int me = group_->rank();
  std::vector<std::shared_ptr<Work>> works;
  if (me != 0) {
    for (const auto& [key, t] : mine) {
      if (key.rfind("state.", 0) == 0) works.push_back(group_->send(t.contiguous(), 0, kStateTag));
    }
    for (const auto& w : works) w->wait();
    return {};
  }
  std::vector<StateDict> all(layout_.servers());
  all[0] = mine;
  for (int s = 1; s < layout_.servers(); ++s) {
    for (const auto& [key, t] : mine) {
      if (key.rfind("state.", 0) != 0) continue;
      const bool per_element = key.size() < 5 || key.compare(key.size() - 5, 5, ".step") != 0;
      Tensor part = empty(per_element ? Shape{layout_.shard_numel(s)} : t.shape(),
                          TensorOptions(t.dtype()).device(t.device()));
      works.push_back(group_->recv(part, s, kStateTag));
      all[s].set(key, part);
    }
  }
  for (const auto& w : works) w->wait();
  return all;
}

void ParameterServer::load_parameters(const std::vector<Variable>& params) {
  check_idle("load_parameters");
  NoGradGuard no_grad;
  const Tensor flat = flatten(params);
  TS_CHECK(flat.numel() == layout_.numel(), "ParameterServer::load_parameters: ", flat.numel(),
           " parameter elements, but the servers hold ", layout_.numel());
  const int me = group_->rank();
  Tensor(shard_.data()).copy_(flat.narrow(0, layout_.shard_offset(me), layout_.shard_numel(me)));
  round_start_ = shard_.data().clone();
}

void ParameterServer::restore_clocks(const std::vector<int64_t>& clocks) {
  check_idle("restore_clocks");
  clock_.restore(clocks);  // checks the count and the values
  updates_per_worker_ = clocks;
  version_ = 0;
  for (int64_t c : clocks) version_ += c;
  round_clock_ = clock_.slowest();
  round_version_ = version_;
  round_start_ = shard_.data().clone();
  if (options_.shared_batches() && group_->rank() == 0) {
    if (queue_) {
      queue_->restore_batches_per_worker(clocks);
    } else {
      restored_taken_ = clocks;
    }
  }
}

void ParameterServer::gather_parameters(const std::vector<Variable>& params) {
  gather_server_shards(layout_, *group_, shard_.data(), params);
}

double ParameterServer::iteration_loss(int64_t clock) const {
  const auto it = loss_sums_.find(clock);
  return it == loss_sums_.end() ? 0.0 : it->second / layout_.workers();
}

void ParameterServer::serve_one() {
  group_->recv(request_, ProcessGroup::kAnySource, kRequestTag)->wait();
  const Request r = Request::decode(request_, layout_.workers());
  // Shared batches: a worker whose epoch is over may ask for the next epoch's first batch while
  // this server still serves the others' last ones; it is answered when that epoch starts.
  if (options_.shared_batches() && r.epoch > serving_epoch_ &&
      (r.kind == RequestKind::kPull || r.kind == RequestKind::kEpochEnd)) {
    deferred_.push_back(r);
    return;
  }
  handle(r);
}

void ParameterServer::handle(const Request& r) {
  const int w = r.worker;
  TS_CHECK(!clock_.is_finished(w), "parameter server ", group_->rank(), ": worker ", w,
           " sent a request after it said done");
  TS_CHECK(r.clock == clock_.clock(w), "parameter server ", group_->rank(), ": worker ", w,
           " sent a request for iteration ", r.clock, " after ", clock_.clock(w),
           " pushes (the ranks disagree on the iteration)");
  switch (r.kind) {
    case RequestKind::kPull:
      TS_CHECK(version_at_pull_[w] < 0 && !held_[w], "parameter server ", group_->rank(),
               ": worker ", w, " pulled twice for iteration ", r.clock);
      TS_CHECK(options_.shared_batches() == (r.epoch >= 0), "parameter server ", group_->rank(),
               ": worker ", w, (r.epoch >= 0 ? " asks for a shared batch" : " pulls without an epoch"),
               ", but this server runs ", (options_.shared_batches() ? "shared" : "per-worker"),
               " batches (the ranks disagree on the options)");
      if (options_.shared_batches() && !assign_batch(r)) break;
      if (clock_.may_start(r.clock)) {
        answer_pull(w, r.clock);
      } else {
        held_[w] = r.clock;
        held_since_[w] = steady_seconds();
      }
      break;
    case RequestKind::kPush:
      apply_push(r);
      break;
    case RequestKind::kDone:
      TS_CHECK(version_at_pull_[w] < 0 && !held_[w], "parameter server ", group_->rank(),
               ": worker ", w, " said done with a pull outstanding");
      clock_.finished(w);
      note_round();
      answer_held_pulls();  // a finished worker holds nobody back
      break;
    case RequestKind::kEpochEnd:
      TS_CHECK(options_.shared_batches() && r.epoch == serving_epoch_ && group_->rank() != 0,
               "parameter server ", group_->rank(), ": worker ", w, " ended epoch ", r.epoch,
               " while epoch ", serving_epoch_, " is served", options_.shared_batches() ? "" :
               " without shared batches");
      ++epoch_ended_;
      break;
  }
}

void ParameterServer::note_round() {
  const int64_t slowest = clock_.slowest();
  if (options_.staleness_bound() != 0 || slowest <= round_clock_) return;
  // Every running worker has pushed iteration round_clock_: its pushes, in worker order.
  for (int w = 0; w < layout_.workers(); ++w) {
    if (!held_pushes_[w]) continue;
    const HeldPush& p = *held_pushes_[w];
    apply(p.request, held_gradients_[w], p.version_at_pull, p.lag);
    held_pushes_[w].reset();
  }
  if (slowest == INT64_MAX) return;  // every worker finished
  round_start_ = shard_.data().clone();  // a new tensor: replies in flight keep the old one
  round_clock_ = slowest;
  round_version_ = version_;
}

void ParameterServer::answer_pull(int worker, int64_t clock) {
  lag_at_pull_[worker] = clock_.lag(clock);
  Tensor snapshot;
  if (options_.staleness_bound() == 0) {
    // Answered only once the slowest reached `clock`, and the slowest is at most this worker.
    TS_CHECK(clock == round_clock_, "parameter server ", group_->rank(), ": a pull for iteration ",
             clock, " while iteration ", round_clock_, " runs (bound 0)");
    snapshot = round_start_;
    version_at_pull_[worker] = round_version_;
  } else {
    // A copy: the shard changes with the next push while the send may still read it.
    snapshot = shard_.data().clone();
    version_at_pull_[worker] = version_;
  }
  replies_.push_back(group_->send(snapshot, layout_.worker_rank(worker), kParametersTag));
  replies_.erase(std::remove_if(replies_.begin(), replies_.end(),
                                [](const std::shared_ptr<Work>& r) { return r->is_completed(); }),
                 replies_.end());
}

void ParameterServer::answer_held_pulls() {
  for (int w = 0; w < layout_.workers(); ++w) {
    if (held_[w] && clock_.may_start(*held_[w])) {
      held_seconds_ += steady_seconds() - held_since_[w];
      const int64_t c = *held_[w];
      held_[w].reset();
      answer_pull(w, c);
    }
  }
}

void ParameterServer::apply_push(const Request& r) {
  const int w = r.worker;
  TS_CHECK(version_at_pull_[w] >= 0, "parameter server ", group_->rank(), ": worker ", w,
           " pushed iteration ", r.clock, " without a pull answered first");
  const int64_t version_at_pull = version_at_pull_[w], lag = lag_at_pull_[w];
  version_at_pull_[w] = -1;
  loss_sums_[r.clock] += r.loss;
  if (options_.staleness_bound() == 0) {
    // Held until the round's last push is in (note_round applies them in worker order).
    if (!held_gradients_[w].defined()) held_gradients_[w] = empty_like(gradient_);
    group_->recv(held_gradients_[w], layout_.worker_rank(w), kGradientTag)->wait();
    held_pushes_[w] = HeldPush{r, version_at_pull, lag};
  } else {
    group_->recv(gradient_, layout_.worker_rank(w), kGradientTag)->wait();
    apply(r, gradient_, version_at_pull, lag);
  }
  clock_.pushed(w);
  note_round();
  answer_held_pulls();
}

void ParameterServer::apply(const Request& r, const Tensor& gradient, int64_t version_at_pull,
                            int64_t lag) {
  const int64_t tau = version_ - version_at_pull;
  stats_.record(tau, lag);
  double lr = r.lr / layout_.workers();
  if (options_.staleness_aware_lr() && tau > 1) lr /= static_cast<double>(tau);
  for (optim::ParamGroup& g : optimizer_->param_groups()) g.options->set_lr(lr);
  shard_.set_grad(gradient);
  optimizer_->step();
  shard_.zero_grad();
  ++version_;
  ++updates_per_worker_[r.worker];
}

}  // namespace dist
}  // namespace tessera
