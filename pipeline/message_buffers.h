// MessageBuffers: the receive buffers of one message channel (a peer and a kind of message),
// reused across micro-batches and steps.
//
// A buffer is a flat byte tensor from the counting allocator. It is lent out by handing over
// the tensor: the posted receive holds it, and then the received tensor (a view of it) does,
// for as long as the stage keeps that activation or gradient. It is free again once the pool
// holds the only reference to its storage, so a buffer is never written while anyone can still
// read it, and a stage that holds M activations (GPipe) simply owns M buffers.
//
//   take(bytes): the free buffer of at least `bytes` lent out last (the likeliest still in
//                cache), else a free smaller one is replaced, else one more is allocated
//
// The buffers stay allocated between steps: that is what makes the next step's receives free
// of allocation and page faults. bytes() says how much they hold.
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/tensor.h"

namespace tessera {
namespace pipeline {

class MessageBuffers {
 public:
  // A flat kU8 tensor of at least `bytes` elements that nobody else references.
  Tensor take(int64_t bytes);
  // Bytes allocated in the pool's buffers, lent out or free.
  int64_t bytes() const;
  int size() const { return static_cast<int>(buffers_.size()); }

 private:
  std::vector<Tensor> buffers_;
  std::vector<int64_t> lent_;  // when each buffer was last lent out (take() calls)
  int64_t takes_ = 0;
};

}  // namespace pipeline
}  // namespace tessera
