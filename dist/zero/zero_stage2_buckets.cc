// ZeroRedundancyOptimizer, stage 2: gradients copied into buckets as backward produces them, each
// bucket reduce-scattered as soon as it is full, in bucket order on every rank, each rank keeping
// the reduced slice that falls in its shard (zero_optimizer.h).
#include "dist/zero/zero_optimizer.h"

#include <optional>
#include <string>

#include "autograd/grad_mode.h"
#include "dist/trace_recorder.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {

void ZeroRedundancyOptimizer::build_buckets() {
  const double cap_bytes = options_.bucket_cap_mb() * 1024 * 1024;
  bucket_of_.assign(params_.size(), 0);
  Bucket current;
  auto close = [&] {
    if (current.params.empty()) return;
    // Collected in reverse; the range runs from the lowest parameter to the highest.
    current.range = {layout_.ranges[current.params.back()].begin,
                     layout_.ranges[current.params.front()].end};
    current.counts = zero::counts_within(current.range, shards_);
    buckets_.push_back(std::move(current));
    current = Bucket();
  };
  for (size_t k = params_.size(); k-- > 0;) {
    bucket_of_[k] = buckets_.size();
    current.params.push_back(k);
    const double bytes = static_cast<double>(layout_.ranges[current.params.front()].end -
                                             layout_.ranges[k].begin) *
                         element_size(flat_dtype_);
    if (bytes >= cap_bytes) close();
  }
  close();
  for (Bucket& b : buckets_) b.pending = static_cast<int64_t>(b.params.size());
  param_ready_.assign(params_.size(), false);
}

void ZeroRedundancyOptimizer::on_grad_ready(size_t index) {
  // The first gradient of this backward: finish_backward runs once the whole backward is done,
  // after the last grad-ready hook.
  end_of_backward_.start();
  TS_CHECK(!param_ready_[index], "ZeroRedundancyOptimizer (stage 2): parameter ", index, " ('",
           params_[index].name(), "') received a second gradient in one backward after its "
           "bucket was reduced");
  copy_into_bucket(index);
  param_ready_[index] = true;
  if (--buckets_[bucket_of_[index]].pending == 0) launch_ready_buckets();
}

void ZeroRedundancyOptimizer::copy_into_bucket(size_t index) {
  Bucket& b = buckets_[bucket_of_[index]];
  if (!b.buffer.defined()) b.buffer = zeros({b.range.size()}, flat_options());
  const zero::Range& r = layout_.ranges[index];
  zero::move_grad_into(params_[index], b.buffer.narrow(0, r.begin - b.range.begin, r.size()));
}

void ZeroRedundancyOptimizer::launch_ready_buckets() {
  // Strictly in bucket order, so every rank issues the same collectives in the same sequence.
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].pending == 0) {
    Bucket& b = buckets_[next_launch_];
    b.reduced = empty({b.counts[group_->rank()]}, flat_options());
    std::optional<trace::CollectiveLabel> label;  // names the collective in a trace
    if (trace::recording()) {
      label.emplace("reduce_scatter bucket " + std::to_string(next_launch_), "reduce_scatter",
                    "\"bucket\":" + std::to_string(next_launch_) +
                        ",\"elements\":" + std::to_string(b.range.size()));
    }
    b.work = launch_reduce_scatter(b.buffer, b.reduced, b.counts);
    // Bound the memory in flight: the bucket launched two before this one is done by now (the
    // communication thread runs them in order), so wait for it and free it.
    if (next_launch_ >= 2) finish_bucket(buckets_[next_launch_ - 2]);
    ++next_launch_;
  }
}

void ZeroRedundancyOptimizer::finish_bucket(Bucket& b) {
  if (b.work == nullptr) return;
  b.work->wait();
  accumulate_shard_grad(zero::intersect(b.range, shards_[group_->rank()]), b.reduced);
  b.work = nullptr;
  b.buffer = Tensor();
  b.reduced = Tensor();
}

void ZeroRedundancyOptimizer::finish_backward() {
  NoGradGuard no_grad;
  // Parameters this backward did not reach contribute zeros; their buckets go out now, still in
  // bucket order.
  for (size_t i = 0; i < params_.size(); ++i) {
    if (param_ready_[i]) continue;
    copy_into_bucket(i);
    --buckets_[bucket_of_[i]].pending;
  }
  launch_ready_buckets();
  for (Bucket& b : buckets_) {
    finish_bucket(b);
    b.pending = static_cast<int64_t>(b.params.size());
  }
  param_ready_.assign(params_.size(), false);
  next_launch_ = 0;
}

void ZeroRedundancyOptimizer::accumulate_shard_grad(const zero::Range& part, const Tensor& grad) {
  if (!shard_.grad().defined()) shard_.set_grad(zeros({shard_numel()}, flat_options()));
  if (part.empty()) return;
  Tensor slot = shard_.grad().narrow(0, part.begin - shard_offset(), part.size());
  add_(slot, grad);
}

}  // namespace dist
}  // namespace tessera
