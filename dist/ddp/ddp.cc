#include "dist/ddp/ddp.h"

#include <optional>
#include <unordered_set>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "dist/device_groups.h"
#include "dist/module_sync.h"
#include "dist/trace_recorder.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<nn::Module> module,
                                                 std::shared_ptr<ProcessGroup> group,
                                                 const DDPOptions& options)
    : module_(std::move(module)), group_(std::move(group)), options_(options) {
  TS_CHECK(module_ != nullptr && group_ != nullptr, "DDP: module and group are required");
  TS_CHECK(options.bucket_cap_mb() > 0 && options.first_bucket_mb() > 0,
           "DDP: bucket sizes must be positive, got bucket_cap_mb ", options.bucket_cap_mb(),
           " and first_bucket_mb ", options.first_bucket_mb());
  register_module("module", module_);
  for (const Variable& p : module_->parameters()) {
    if (p.requires_grad()) params_.push_back(p);
  }
  TS_CHECK(!params_.empty(), "DDP: the module (", module_->type_name(), ") has no parameters that "
           "require grad. If it holds layers as members, register them with register_module(): "
           "unregistered layers' parameters are not in module->parameters()");
  claim_ = GradReductionClaim(params_, "DistributedDataParallel");
  const Device device = params_.empty() ? Device::cpu() : params_[0].data().device();
  comm_ = options_.use_device_group() ? group_for_device(group_, device) : group_;
  verify_same_parameters(*module_, *group_);
  broadcast_module_states(*module_, *group_, 0, /*buffers=*/true);
  build_buckets();
  for (const auto& [name, p] : module_->named_parameters()) {
    for (size_t i = 0; i < params_.size(); ++i) {
      if (!p.is_same(params_[i])) continue;
      const size_t dot = name.rfind('.');
      layer_of_.resize(params_.size());
      layer_of_[i] = dot == std::string::npos ? name : name.substr(0, dot);
    }
  }
  layer_of_.resize(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    hook_handles_.push_back(
        params_[i].register_grad_ready_hook([this, i](Variable&) { on_grad_ready(i); }));
  }
}

DistributedDataParallel::~DistributedDataParallel() {
  for (size_t i = 0; i < params_.size(); ++i) params_[i].remove_hook(hook_handles_[i]);
}

void DistributedDataParallel::build_buckets() {
  bucket_of_.assign(params_.size(), 0);
  slot_of_.assign(params_.size(), 0);
  // Reverse registration order; a bucket closes once it reaches its cap (the first one's is
  // smaller) or when the dtype changes.
  Bucket current;
  auto close = [&] {
    if (current.params.empty()) return;
    current.buffer = zeros({current.numel}, TensorOptions(current.dtype).device(
                                                params_[current.params[0]].device()));
    buckets_.push_back(std::move(current));
    current = Bucket();
  };
  for (size_t k = params_.size(); k-- > 0;) {
    const Variable& p = params_[k];
    if (!current.params.empty() && current.dtype != p.dtype()) close();
    if (current.params.empty()) current.dtype = p.dtype();
    bucket_of_[k] = buckets_.size();
    slot_of_[k] = current.params.size();
    current.params.push_back(k);
    current.offsets.push_back(current.numel);
    current.numel += p.numel();
    const double cap_mb = buckets_.empty() ? options_.first_bucket_mb() : options_.bucket_cap_mb();
    if (static_cast<double>(current.numel) * element_size(current.dtype) >= cap_mb * 1024 * 1024) {
      close();
    }
  }
  close();
  // What a communication hook sees of each bucket: the buffer and each parameter's view.
  for (size_t b = 0; b < buckets_.size(); ++b) {
    GradBucket g;
    g.index = b;
    g.buffer = buckets_[b].buffer;
    g.parameters = buckets_[b].params;
    for (size_t i : buckets_[b].params) g.gradients.push_back(bucket_view(i));
    grad_buckets_.push_back(std::move(g));
  }
}

Tensor DistributedDataParallel::bucket_view(size_t index) const {
  const Bucket& b = buckets_[bucket_of_[index]];
  return b.buffer.narrow(0, b.offsets[slot_of_[index]], params_[index].numel())
      .view(params_[index].shape());
}

void DistributedDataParallel::register_comm_hook(CommHook hook) {
  TS_CHECK(hook != nullptr, "DDP: register_comm_hook got an empty hook");
  hook_ = std::make_shared<FunctionHook>("function", std::move(hook));
}

void DistributedDataParallel::register_comm_hook(std::shared_ptr<CommunicationHook> hook) {
  TS_CHECK(hook != nullptr, "DDP: register_comm_hook got an empty hook");
  hook_ = std::move(hook);
}

Variable DistributedDataParallel::forward(const Variable& x) {
  if (expecting_) {
    std::vector<std::string> missing;
    const auto named = module_->named_parameters();
    for (size_t i = 0; i < params_.size(); ++i) {
      if (!param_ready_[i]) {
        for (const auto& [name, p] : named) {
          if (p.is_same(params_[i])) missing.push_back(name);
        }
      }
    }
    TS_FAIL("DDP: the previous iteration's gradient reduction never finished: parameters ",
            missing, " received no gradient. If the model leaves parameters unused, construct "
            "DDP with DDPOptions().find_unused_parameters(true); otherwise call backward() on the "
            "loss of every DDP forward");
  }
  if (options_.broadcast_buffers()) {
    std::optional<trace::CollectiveLabel> label;
    if (trace::recording()) label.emplace("broadcast buffers", "broadcast");
    broadcast_buffers(*module_, *comm_, 0);
  }
  const bool traced = trace::recording();
  const double start = traced ? steady_seconds() : 0.0;
  Variable out = module_->forward(x);
  if (traced) trace::TraceRecorder::global().span("forward", "forward", start, steady_seconds());
  if (GradMode::is_enabled() && !no_sync_ && out.requires_grad()) prepare_for_backward(out);
  return out;
}

void DistributedDataParallel::prepare_for_backward(const Variable& output) {
  expecting_ = true;
  finish_queued_ = false;  // a backward that threw dropped its callback
  next_launch_ = ready_count_ = 0;
  param_ready_.assign(params_.size(), false);
  bucket_pending_.clear();
  for (const Bucket& b : buckets_) bucket_pending_.push_back(static_cast<int64_t>(b.params.size()));
  bucket_work_.assign(buckets_.size(), nullptr);
  trace_.clear();
  backward_start_ = 0;
  if (trace::recording()) {
    // The output's gradient arrives first in backward: the first layer's span starts there.
    output.register_hook([this](Tensor&) { backward_start_ = steady_seconds(); });
  }
  if (options_.gradient_as_bucket_view()) {
    // Gradients accumulate straight into the buckets.
    for (size_t i = 0; i < params_.size(); ++i) {
      const Tensor view = bucket_view(i);
      const Tensor& grad = params_[i].grad();
      if (grad.defined() && grad.is_same(view)) continue;
      if (grad.defined()) {
        Tensor(view).copy_(grad);
      } else {
        Tensor(view).zero_();
      }
      params_[i].set_grad(view);
    }
  }
  if (options_.find_unused_parameters()) {
    // Walk the graph from the output: parameters whose accumulator is not reached get no
    // gradient this iteration, so they are ready now (contributing zeros).
    std::unordered_set<const VariableImpl*> reached;
    std::unordered_set<const Node*> seen;
    std::vector<Node*> stack;
    if (output.grad_fn()) stack.push_back(output.grad_fn().get());
    while (!stack.empty()) {
      Node* node = stack.back();
      stack.pop_back();
      if (!seen.insert(node).second) continue;
      if (auto* acc = dynamic_cast<AccumulateGrad*>(node)) reached.insert(acc->leaf().impl());
      for (const Edge& e : node->next_edges()) {
        if (e.valid()) stack.push_back(e.node.get());
      }
    }
    for (size_t i = 0; i < params_.size(); ++i) {
      if (!reached.count(params_[i].impl())) mark_ready(i);
    }
  }
}

void DistributedDataParallel::on_grad_ready(size_t index) {
  if (!expecting_ || no_sync_ || param_ready_[index]) return;
  if (!finish_queued_) {
    // The first gradient of this backward: the engine calls finish_reduction once the whole
    // backward is done, after the last grad-ready hook, whichever parameter that is.
    finish_queued_ = true;
    queue_callback([this] {
      finish_queued_ = false;
      if (ready_count_ == params_.size()) finish_reduction();
    });
  }
  mark_ready(index);
}

double ReductionTiming::communication_seconds() const {
  double total = 0;
  for (const BucketTime& b : buckets) total += b.finished - b.started;
  return total;
}

void DistributedDataParallel::mark_ready(size_t index) {
  trace_.push_back({DDPEvent::kGradReady, index, steady_seconds()});
  param_ready_[index] = true;
  const Tensor view = bucket_view(index);
  const Tensor& grad = params_[index].grad();
  if (!grad.defined()) {
    Tensor(view).zero_();
  } else if (!grad.is_same(view)) {
    Tensor(view).copy_(grad);
  }
  ++ready_count_;
  if (--bucket_pending_[bucket_of_[index]] == 0) launch_ready_buckets();
}

void DistributedDataParallel::launch_ready_buckets() {
  // Strictly in bucket order, so all ranks issue the same collectives in the same sequence.
  while (next_launch_ < buckets_.size() && bucket_pending_[next_launch_] == 0) {
    if (trace::recording()) {
      const std::string b = std::to_string(next_launch_);
      const std::string args =
          "\"bucket\":" + b + ",\"elements\":" + std::to_string(buckets_[next_launch_].numel);
      trace::TraceRecorder::global().instant("launch bucket " + b, "launch", args);
      trace::CollectiveLabel label("all_reduce bucket " + b, "all_reduce", args);
      bucket_work_[next_launch_] = hook_->reduce(*comm_, grad_buckets_[next_launch_]);
    } else {
      bucket_work_[next_launch_] = hook_->reduce(*comm_, grad_buckets_[next_launch_]);
    }
    trace_.push_back({DDPEvent::kLaunch, next_launch_, steady_seconds()});
    ++next_launch_;
  }
}

void DistributedDataParallel::finish_reduction() {
  timing_ = ReductionTiming();
  timing_.last_gradient = steady_seconds();
  const double scale = 1.0 / group_->size();
  for (size_t b = 0; b < buckets_.size(); ++b) {
    bucket_work_[b]->wait();
    trace_.push_back({DDPEvent::kWait, b, steady_seconds()});
    mul_(buckets_[b].buffer, scale);
  }
  for (size_t b = 0; b < buckets_.size(); ++b) {
    ReductionTiming::BucketTime t;
    for (const DDPEvent& e : trace_) {
      if (e.kind == DDPEvent::kLaunch && e.index == b) t.launched = e.time;
    }
    // Hooks may chain works; the timestamps come from the communication thread's own work.
    if (auto* f = dynamic_cast<FutureWork*>(bucket_work_[b].get())) {
      t.started = f->started_at();
      t.finished = f->finished_at();
    }
    timing_.buckets.push_back(t);
  }
  if (!options_.gradient_as_bucket_view()) {
    for (size_t i = 0; i < params_.size(); ++i) {
      const Tensor view = bucket_view(i);
      if (params_[i].grad().defined()) {
        Tensor(params_[i].grad()).copy_(view);
      } else {
        params_[i].set_grad(view.clone());
      }
    }
  }
  timing_.done = steady_seconds();
  expecting_ = false;
  if (trace::recording()) {
    record_backward_layers();
    trace::TraceRecorder::global().span("wait for buckets", "wait", timing_.last_gradient,
                                        timing_.done);
  }
}

void DistributedDataParallel::record_backward_layers() const {
  // Consecutive gradients of one module make one span; it starts where the previous ended.
  std::vector<const DDPEvent*> ready;
  for (const DDPEvent& e : trace_) {
    if (e.kind == DDPEvent::kGradReady) ready.push_back(&e);
  }
  if (ready.empty()) return;
  double from = backward_start_ > 0 ? backward_start_ : ready.front()->time;
  for (size_t k = 0; k < ready.size();) {
    const std::string& layer = layer_of_[ready[k]->index];
    size_t next = k;
    while (next < ready.size() && layer_of_[ready[next]->index] == layer) ++next;
    const double to = ready[next - 1]->time;
    trace::TraceRecorder::global().span("backward " + layer, "backward", from, to,
                                        "\"layer\":\"" + layer + "\"");
    from = to;
    k = next;
  }
}

DistributedDataParallel::NoSync::NoSync(DistributedDataParallel& ddp)
    : ddp_(ddp), previous_(ddp.no_sync_) {
  ddp_.no_sync_ = true;
}

DistributedDataParallel::NoSync::~NoSync() { ddp_.no_sync_ = previous_; }

}  // namespace dist
}  // namespace tessera
