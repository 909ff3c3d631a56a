#include "pipeline/message_buffers.h"

#include "tensor/ops.h"

namespace tessera {
namespace pipeline {
namespace {

// Only the pool holds it: no posted receive, no received tensor, no view of one.
bool is_free(const Tensor& buffer) { return buffer.storage().use_count() == 1; }

}  // namespace

Tensor MessageBuffers::take(int64_t bytes) {
  ++takes_;
  int best = -1, smaller = -1;
  for (int i = 0; i < size(); ++i) {
    if (!is_free(buffers_[i])) continue;
    if (buffers_[i].numel() < bytes) {
      smaller = i;
    } else if (best < 0 || lent_[i] > lent_[best]) {
      best = i;
    }
  }
  if (best < 0) {
    // Messages grew (a larger batch): a free buffer too small for them is replaced, not kept.
    best = smaller;
    if (best < 0) {
      best = size();
      buffers_.emplace_back();
      lent_.push_back(0);
    }
    buffers_[best] = empty({bytes}, kU8);
  }
  lent_[best] = takes_;
  return buffers_[best];
}

int64_t MessageBuffers::bytes() const {
  int64_t total = 0;
  for (const Tensor& buffer : buffers_) total += buffer.numel();
  return total;
}

}  // namespace pipeline
}  // namespace tessera
