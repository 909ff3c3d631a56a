#include "dist/compression/error_feedback.h"

#include <string>

#include "tensor/ops.h"

namespace tessera {
namespace dist {
namespace compression {

ErrorFeedback::ErrorFeedback(std::unique_ptr<Compressor> inner) : inner_(std::move(inner)) {
  TS_CHECK(inner_ != nullptr, "ErrorFeedback: no compressor to wrap");
}

Tensor ErrorFeedback::compress(const Tensor& x, const CompressContext& ctx) {
  Tensor& e = residuals_[ctx.bucket];
  if (e.defined()) {
    TS_CHECK(e.numel() == x.numel(), "ErrorFeedback: bucket ", ctx.bucket, " had ", e.numel(),
             " elements and now has ", x.numel());
  }
  const Tensor y = e.defined() ? add(x, e) : x.clone();
  const Tensor message = inner_->compress(y, ctx);
  replaced_[ctx.bucket] = e;  // a handle: e is replaced below, not written in place
  e = sub(y, decompress(*inner_, message, y.numel(), ctx));
  return message;
}

void ErrorFeedback::settle(size_t bucket, bool keep) {
  inner_->settle(bucket, keep);
  const auto it = replaced_.find(bucket);
  if (it == replaced_.end()) return;
  if (!keep) {
    if (it->second.defined()) {
      residuals_[bucket] = it->second;
    } else {
      residuals_.erase(bucket);  // the bucket's first compression: no residual before it
    }
  }
  replaced_.erase(it);
}

Tensor ErrorFeedback::residual(size_t bucket) const {
  const auto it = residuals_.find(bucket);
  return it == residuals_.end() ? Tensor() : it->second;
}

StateDict ErrorFeedback::state_dict() const {
  StateDict out;
  for (const auto& [bucket, e] : residuals_) out.set("residual." + std::to_string(bucket), e.clone());
  for (const auto& [key, t] : inner_->state_dict()) out.set("inner." + key, t);
  return out;
}

void ErrorFeedback::load_state_dict(const StateDict& state) {
  residuals_.clear();
  replaced_.clear();
  StateDict inner;
  for (const auto& [key, t] : state) {
    if (key.rfind("residual.", 0) == 0) {
      residuals_[std::stoul(key.substr(9))] = t.clone();
    } else if (key.rfind("inner.", 0) == 0) {
      inner.set(key.substr(6), t);
    } else {
      TS_FAIL("ErrorFeedback::load_state_dict: unexpected key '", key, "'");
    }
  }
  inner_->load_state_dict(inner);
}

}  // namespace compression
}  // namespace dist
}  // namespace tessera
