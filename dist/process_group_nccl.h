// ProcessGroupNCCL: collectives on CUDA tensors through NCCL, one GPU per rank.
//
// Bootstrap: rank 0 makes an ncclUniqueId and broadcasts its bytes over an existing (MPI)
// group with the same ranks; every rank then joins the NCCL communicator with it.
//
// Ordering without host synchronization: each collective records an event on the caller's
// current (compute) stream and makes the group's own communication stream wait for it, so
// NCCL reads the tensor only after the kernels that wrote it; the NCCL call is then enqueued
// on the communication stream and a "done" event recorded after it. Work::wait() makes the
// *caller's* current stream wait for "done" and returns at once: the host never blocks, the
// GPU orders the next kernels after the communication. The Work holds the tensors until then,
// so their memory is not reused while NCCL may still touch it.
//
// The byte ledger records, once a call was issued, what the ring algorithms send (NCCL's own
// choice of algorithm is not visible): all-reduce 2 (N-1)/N of the buffer, reduce-scatter and
// all-gather (N-1)/N.
// NCCL has no message tags: send/recv between a pair of ranks match in issue order, and the
// tag is ignored. Uneven reduce-scatter/all-gather counts run as grouped ncclReduce /
// ncclBroadcast calls, one per rank.
#pragma once

#include <memory>
#include <vector>

#include "dist/process_group.h"
#include "tensor/device.h"

namespace tessera {
namespace dist {

class ProcessGroupNCCL : public ProcessGroup {
 public:
  // Collective over `bootstrap`'s members; `device` is this rank's GPU.
  ProcessGroupNCCL(const std::shared_ptr<ProcessGroup>& bootstrap, Device device);
  ~ProcessGroupNCCL() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::vector<int>& world_ranks() const override { return world_ranks_; }
  Device device() const { return device_; }

  std::shared_ptr<Work> all_reduce(const Tensor& tensor, ReduceOp op = ReduceOp::kSum) override;
  std::shared_ptr<Work> reduce_scatter(const Tensor& input, const Tensor& output,
                                       const std::vector<int64_t>& counts,
                                       ReduceOp op = ReduceOp::kSum) override;
  std::shared_ptr<Work> all_gather(const Tensor& input, const Tensor& output,
                                   const std::vector<int64_t>& counts) override;
  std::shared_ptr<Work> broadcast(const Tensor& tensor, int root) override;
  std::shared_ptr<Work> send(const Tensor& tensor, int dst, int tag) override;
  std::shared_ptr<Work> recv(const Tensor& tensor, int src, int tag) override;
  // Blocks the host until every rank has reached it (an all-reduce of one element, waited for
  // on the host).
  std::shared_ptr<Work> barrier() override;
  using ProcessGroup::all_gather;
  using ProcessGroup::reduce_scatter;

 private:
  struct State;  // NCCL communicator, stream (CUDA types stay in the .cc)
  std::unique_ptr<State> state_;
  int rank_ = 0, size_ = 1;
  std::vector<int> world_ranks_;
  Device device_;
};

}  // namespace dist
}  // namespace tessera
