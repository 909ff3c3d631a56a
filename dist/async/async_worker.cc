#include "dist/async/async_worker.h"

#include "autograd/grad_mode.h"
#include "dist/async/batch_queue.h"
#include "dist/module_sync.h"
#include "dist/trace_recorder.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {

namespace {

// The worker's one option: the learning rate it pushes.
class PushOptions : public optim::OptimizerOptions {
 public:
  explicit PushOptions(double lr) : lr_(lr) {}
  std::unique_ptr<optim::OptimizerOptions> clone() const override {
    return std::make_unique<PushOptions>(*this);
  }
  std::vector<std::pair<std::string, double>> values() const override { return {{"lr", lr_}}; }
  void set(const std::string& name, double value) override {
    TS_CHECK(name == "lr", "AsyncWorker: no option '", name, "' (only lr)");
    lr_ = value;
  }
  double lr() const override { return lr_; }
  void set_lr(double lr) override { lr_ = lr; }

 private:
  double lr_;
};

int64_t numel_of(const std::vector<Variable>& params) {
  int64_t n = 0;
  for (const Variable& p : params) n += p.numel();
  return n;
}

}  // namespace

AsyncWorker::AsyncWorker(std::vector<Variable> params, std::shared_ptr<ProcessGroup> group,
                         double lr, AsyncOptions options)
    : Optimizer(std::make_unique<PushOptions>(lr)),
      group_(std::move(group)),
      layout_(group_ ? group_->size() : 0, options, numel_of(params)),
      worker_(layout_.worker_index(group_->rank())),
      params_(std::move(params)),
      options_(options) {
  const DType dtype = flat_dtype(params_, "AsyncWorker");
  TS_CHECK(!layout_.is_server(group_->rank()), "AsyncWorker on rank ", group_->rank(),
           ", which is a server (ranks 0..", layout_.servers() - 1, " serve: ParameterServer)");
  TS_CHECK(lr > 0, "AsyncWorker: learning rate ", lr, " (must be > 0)");
  add_param_group(optim::ParamGroup(params_));
  broadcast_parameters(params_, *group_, 0);
  flat_ = empty({layout_.numel()}, TensorOptions(dtype).device(params_[0].device()));
  gradients_ = empty({layout_.numel()}, TensorOptions(dtype).device(params_[0].device()));
}

AsyncWorker::~AsyncWorker() {
  if (std::uncaught_exceptions() == 0) wait_for_sends();
}

void AsyncWorker::add_param_group(optim::ParamGroup group) {
  TS_CHECK(param_groups().empty(), "AsyncWorker: the parameters are fixed at construction");
  Optimizer::add_param_group(std::move(group));
}

void AsyncWorker::wait_for_sends() {
  for (const auto& s : sends_) s->wait();
  sends_.clear();
}

void AsyncWorker::pull() {
  TS_CHECK(!finished_, "AsyncWorker::pull after finish()");
  TS_CHECK(!pulled_, "AsyncWorker::pull twice without a step() between (iteration ", clock_, ")");
  TS_CHECK(!options_.shared_batches(), "AsyncWorker::pull with shared batches: pull_batch(epoch) "
           "takes the batch number with the parameters");
  const double start = steady_seconds();
  trace::SpanIfRecording span("pull parameters", "wait");
  Request request;
  request.kind = RequestKind::kPull;
  request.worker = worker_;
  request.clock = clock_;
  receive_shards(request.encode(), 0);
  pull_seconds_ += steady_seconds() - start;
}

int64_t AsyncWorker::pull_batch(int64_t epoch) {
  TS_CHECK(!finished_, "AsyncWorker::pull_batch after finish()");
  TS_CHECK(!pulled_, "AsyncWorker::pull_batch twice without a step() between (iteration ", clock_,
           ")");
  TS_CHECK(options_.shared_batches(), "AsyncWorker::pull_batch without shared batches "
           "(AsyncOptions::shared_batches): each worker has its own shard, pull() it");
  TS_CHECK(epoch >= 0, "AsyncWorker::pull_batch: epoch ", epoch, " (must be >= 0)");
  const double start = steady_seconds();
  trace::SpanIfRecording span("pull batch and parameters", "wait");
  Request request;
  request.kind = RequestKind::kPull;
  request.worker = worker_;
  request.clock = clock_;
  request.epoch = epoch;
  const Tensor message = request.encode();
  // Server 0 answers with the batch number and its shard (sent with "epoch over" too, so both
  // receives are posted before the request: see ParameterServer::assign_batch).
  Tensor batch = empty({1}, kI64);
  std::shared_ptr<Work> answer = group_->recv(batch, 0, kAssignmentTag);
  std::shared_ptr<Work> shard0 =
      group_->recv(flat_.narrow(0, layout_.shard_offset(0), layout_.shard_numel(0)), 0,
                   kParametersTag);
  group_->send(message, 0, kRequestTag)->wait();
  answer->wait();
  shard0->wait();
  const int64_t b = batch.data<int64_t>()[0];
  if (b == SharedBatchQueue::kEpochEnd) {
    request.kind = RequestKind::kEpochEnd;
    const Tensor end = request.encode();
    for (int s = 1; s < layout_.servers(); ++s) sends_.push_back(group_->send(end, s, kRequestTag));
    wait_for_sends();
  } else {
    receive_shards(message, 1);  // server 0's is here; the others' on request
  }
  pull_seconds_ += steady_seconds() - start;
  return b;
}

void AsyncWorker::receive_shards(const Tensor& message, int first_server) {
  std::vector<std::shared_ptr<Work>> works;
  for (int s = first_server; s < layout_.servers(); ++s) {
    works.push_back(
        group_->recv(flat_.narrow(0, layout_.shard_offset(s), layout_.shard_numel(s)), s,
                     kParametersTag));
    works.push_back(group_->send(message, s, kRequestTag));
  }
  for (const auto& w : works) w->wait();
  unflatten(flat_, params_);
  pulled_ = true;
}

void AsyncWorker::step() {
  TS_CHECK(pulled_, "AsyncWorker::step without a pull() first (iteration ", clock_,
           "): the gradient must be taken at the servers' parameters");
  trace::SpanIfRecording span("push gradient", "send");
  wait_for_sends();  // the last push's buffers are reused
  NoGradGuard no_grad;
  int64_t at = 0;
  for (const Variable& p : params_) {
    Tensor part = gradients_.narrow(0, at, p.numel());
    if (p.grad().defined()) {
      part.copy_(p.grad().reshape({-1}));
    } else {
      part.fill_(0.0);
    }
    at += p.numel();
  }
  Request request;
  request.kind = RequestKind::kPush;
  request.worker = worker_;
  request.clock = clock_;
  request.lr = param_groups()[0].options->lr();
  request.loss = loss_;
  const Tensor message = request.encode();
  for (int s = 0; s < layout_.servers(); ++s) {
    sends_.push_back(group_->send(message, s, kRequestTag));
    sends_.push_back(group_->send(
        gradients_.narrow(0, layout_.shard_offset(s), layout_.shard_numel(s)), s, kGradientTag));
  }
  ++clock_;
  pulled_ = false;
}

void AsyncWorker::finish() {
  TS_CHECK(!finished_, "AsyncWorker::finish called twice");
  TS_CHECK(!pulled_, "AsyncWorker::finish after a pull() without its step()");
  wait_for_sends();
  Request request;
  request.kind = RequestKind::kDone;
  request.worker = worker_;
  request.clock = clock_;
  const Tensor message = request.encode();
  for (int s = 0; s < layout_.servers(); ++s) sends_.push_back(group_->send(message, s, kRequestTag));
  wait_for_sends();
  finished_ = true;
}

void AsyncWorker::restore_clock(int64_t clock) {
  TS_CHECK(!pulled_ && !finished_, "AsyncWorker::restore_clock(", clock, ") ",
           finished_ ? "after finish()" : "between a pull and its step()");
  TS_CHECK(clock >= 0, "AsyncWorker::restore_clock(", clock, "): must be >= 0");
  clock_ = clock;
}

void AsyncWorker::gather_parameters() {
  gather_server_shards(layout_, *group_, Tensor(), params_);
}

StateDict AsyncWorker::state_dict() const {
  StateDict out;
  save_param_groups(out);
  return out;
}

void AsyncWorker::load_state_dict(const StateDict& state) { load_param_groups(state); }

}  // namespace dist
}  // namespace tessera
