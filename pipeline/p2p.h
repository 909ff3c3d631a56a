// Point-to-point messages between stages: a tensor led by a small header.
//
//   header (i64 x 12): [ microbatch | virtual stage of the sender | dtype | ndim | dims... ]
//   payload:           the tensor's elements, contiguous
//
// The header lets the receiver allocate the right buffer without knowing the shape in advance
// (the last batch of an epoch has smaller micro-batches) and check that the message is the one
// its schedule expects: a mismatch is an error naming both, never a silent mix-up. Both parts
// go with the process group's send/recv, matched by (peer, tag); messages with the same tag
// between two ranks arrive in the order they were sent (MPI's non-overtaking rule).
#pragma once

#include <memory>
#include <vector>

#include "dist/process_group.h"
#include "tensor/tensor.h"

namespace tessera {
namespace pipeline {

enum class MessageKind { kActivation, kGradient };

// Returns the two sends' Works; the caller waits for them before the tensor may change.
std::vector<std::shared_ptr<dist::Work>> send_tensor(dist::ProcessGroup& group, const Tensor& tensor,
                                                     int dst, MessageKind kind, int microbatch,
                                                     int virtual_stage);

// Blocks until the message has arrived; the tensor is allocated on `device` (the receiving
// stage's). Checks that it carries `microbatch` from `virtual_stage`.
Tensor recv_tensor(dist::ProcessGroup& group, int src, MessageKind kind, int microbatch,
                   int virtual_stage, Device device = Device::cpu());

}  // namespace pipeline
}  // namespace tessera
