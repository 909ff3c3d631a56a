#include "dist/gossip/gossip.h"

#include "autograd/grad_mode.h"
#include "dist/trace_recorder.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {

namespace {
constexpr int kGossipTag = 0x6055;  // one exchange per step, completed before the next
}

GossipAverager::GossipAverager(std::vector<Variable> params, std::shared_ptr<ProcessGroup> group,
                               MixingMatrix mixing)
    : params_(std::move(params)), group_(std::move(group)), mixing_(std::move(mixing)) {
  TS_CHECK(group_ != nullptr, "GossipAverager: group is null");
  TS_CHECK(!params_.empty(), "GossipAverager: no parameters");
  TS_CHECK(mixing_.size() == group_->size(), "GossipAverager: a ", mixing_.name(),
           " mixing matrix of ", mixing_.size(), " ranks for a group of ", group_->size());
  dtype_ = params_[0].dtype();
  for (const Variable& p : params_) {
    TS_CHECK(p.dtype() == dtype_ && is_floating(dtype_), "GossipAverager: parameter ", p.name(),
             " is ", p.dtype(), ", the first ", dtype_, " (one floating-point dtype)");
    numel_ += p.numel();
  }
  in_ = mixing_.in_neighbours(group_->rank());
  out_ = mixing_.out_neighbours(group_->rank());
}

Tensor GossipAverager::flatten() const {
  Tensor flat = empty({numel_}, TensorOptions(dtype_).device(params_[0].device()));
  int64_t at = 0;
  for (const Variable& p : params_) {
    flat.narrow(0, at, p.numel()).copy_(p.data().reshape({-1}));
    at += p.numel();
  }
  return flat;
}

void GossipAverager::launch() {
  TS_CHECK(!launched_, "GossipAverager::launch: the last exchange was not finished");
  launched_ = true;
  NoGradGuard no_grad;
  trace::SpanIfRecording span("gossip send and receive posted", "send");
  sent_ = flatten();
  received_.clear();
  // Receives first, then sends; every pair's messages are matched by (source, tag) in order.
  for (int src : in_) {
    received_.push_back(empty({numel_}, TensorOptions(dtype_).device(sent_.device())));
    works_.push_back(group_->recv(received_.back(), src, kGossipTag));
  }
  for (int dst : out_) works_.push_back(group_->send(sent_, dst, kGossipTag));
}

void GossipAverager::finish() {
  TS_CHECK(launched_, "GossipAverager::finish: launch() was not called");
  launched_ = false;
  {
    trace::SpanIfRecording span("gossip wait for neighbours", "wait");
    for (const auto& w : works_) w->wait();
  }
  works_.clear();
  NoGradGuard no_grad;
  trace::SpanIfRecording span("gossip mix", "mix");
  const int me = group_->rank();
  Tensor mixed = mul(sent_, mixing_.weight(me, me));
  for (size_t k = 0; k < in_.size(); ++k) add_(mixed, mul(received_[k], mixing_.weight(me, in_[k])));
  int64_t at = 0;
  for (const Variable& p : params_) {
    Tensor(p.data()).copy_(mixed.narrow(0, at, p.numel()).view(p.shape()));
    at += p.numel();
  }
  sent_ = Tensor();
  received_.clear();
}

int64_t GossipAverager::elements_sent_per_step() const {
  return static_cast<int64_t>(out_.size()) * numel_;
}

}  // namespace dist
}  // namespace tessera
