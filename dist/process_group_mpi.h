// ProcessGroupMPI: collectives on CPU tensors (CUDA tensors are staged through host memory)
// between the processes of an MPI communicator.
//
// The collectives are the ring algorithms, written out over MPI point-to-point messages so
// that the byte ledger counts what really goes over the wire and a reader can follow them:
//
//   reduce-scatter, N ranks, buffer cut into N chunks (chunk k ends on rank k):
//     step s = 0 .. N-2: send chunk (r-1-s) to rank r+1, receive chunk (r-2-s) from rank r-1
//                        and add it into our copy of that chunk
//   all-gather: step s = 0 .. N-2: send chunk (r-s) right, receive chunk (r-1-s) from the left
//   all-reduce = reduce-scatter then all-gather: each rank sends 2 (N-1)/N of the buffer.
//
//   rank 0: [a0 a1 a2]      step 0: 0 sends a2 -> 1, 1 sends b0 -> 2, 2 sends c1 -> 0
//   rank 1: [b0 b1 b2]      step 1: 0 sends a1+c1 -> 1, ...
//   rank 2: [c0 c1 c2]      after N-1 steps rank k holds the full sum of chunk k
//
// Every group has its own communication thread and its own communicators (one for collectives,
// a duplicate for tagged point-to-point), so groups never block each other.
//
// Network emulation (network_emulation.h): with a setting on, a ring step ends no earlier than
// one message time after it was posted (the communication thread waits out the remainder);
// a broadcast round's message and a barrier are held for their time before they go;
// point-to-point sends are held by a DelayLine (its own thread, made the first time a setting
// is on) so the caller's thread never blocks. Off, a message costs a branch or two on a bool.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "dist/comm_thread.h"
#include "dist/process_group.h"

namespace tessera {
namespace dist {

class ProcessGroupMPI : public ProcessGroup {
 public:
  // Takes ownership of `comm` (freed at shutdown unless it is MPI_COMM_WORLD).
  ProcessGroupMPI(MPI_Comm comm, std::vector<int> world_ranks);
  ~ProcessGroupMPI() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::vector<int>& world_ranks() const override { return world_ranks_; }

  std::shared_ptr<Work> all_reduce(const Tensor& tensor, ReduceOp op = ReduceOp::kSum) override;
  std::shared_ptr<Work> reduce_scatter(const Tensor& input, const Tensor& output,
                                       const std::vector<int64_t>& counts,
                                       ReduceOp op = ReduceOp::kSum) override;
  std::shared_ptr<Work> all_gather(const Tensor& input, const Tensor& output,
                                   const std::vector<int64_t>& counts) override;
  std::shared_ptr<Work> broadcast(const Tensor& tensor, int root) override;
  std::shared_ptr<Work> send(const Tensor& tensor, int dst, int tag) override;
  std::shared_ptr<Work> recv(const Tensor& tensor, int src, int tag) override;
  std::shared_ptr<Work> barrier() override;
  void set_network_emulation(const NetworkEmulation& emulation) override;
  NetworkEmulation network_emulation() const override { return emulation_; }
  using ProcessGroup::all_gather;
  using ProcessGroup::reduce_scatter;

  // MPI_Comm_split of this group's communicator, run on its communication thread in order with
  // its collectives (every member must call it). Returns MPI_COMM_NULL for MPI_UNDEFINED.
  MPI_Comm split(int color, int key);
  // Drains the communication thread and frees the communicators (before MPI_Finalize).
  void shutdown();
  MPI_Comm comm() const { return comm_; }

 private:
  // Ring steps on a flat host buffer (comm thread only).
  void ring_reduce_scatter(const Tensor& buffer, const std::vector<int64_t>& counts, ReduceOp op,
                           CollectiveKind kind);
  void ring_all_gather(const Tensor& buffer, const std::vector<int64_t>& counts,
                       CollectiveKind kind);
  void sendrecv(const Tensor& send, int dst, const Tensor& recv, int src, CollectiveKind kind);
  // Under emulation (comm thread only), recording each message's time in the ledger:
  // holds a message of `bytes` about to be sent for its flight time (broadcast), or
  // waits until a ring step posted at `posted` has taken one message time.
  void hold_message(CollectiveKind kind, int64_t bytes);
  void wait_out_step(CollectiveKind kind, EmulationClock::time_point posted, int64_t sent,
                     int64_t received);
  // A point-to-point send handed to the DelayLine.
  std::shared_ptr<Work> send_held(const Tensor& buf, int dst, int tag);
  // "all_reduce #12 (4096 elements of f32 on rank 1 of a group of 4)": numbers collectives in
  // issue order (caller's thread), for errors.
  std::string describe(const char* collective, const Tensor& t);
  // "receive from rank 3 (4096 elements of f32, tag 7100, on rank 2)", for a timeout's message.
  std::string p2p_description(const char* direction, const Tensor& t, int peer, int tag) const;
  // Throws when a received piece is not the `expected` size (ranks disagree), naming the
  // running collective; or on any other MPI error.
  void check_arrival(int rc, const MPI_Status& status, int expected, int src) const;
  void check_counts(const std::vector<int64_t>& counts, const char* op) const;

  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Comm p2p_comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::vector<int> world_ranks_;
  std::unique_ptr<CommThread> thread_;
  int64_t collectives_issued_ = 0;  // caller's thread
  std::string running_;             // the collective the comm thread runs (comm thread only)
  // The emulation as the caller set it (caller's thread: point-to-point sends read it) and as
  // the communication thread applies it (set by a task queued in order with the collectives).
  NetworkEmulation emulation_;
  NetworkEmulation comm_emulation_;
  bool comm_emulating_ = false;
  // Holds point-to-point sends; made the first time emulation is on, and from then on every
  // send goes through it (so a send can never overtake one still held).
  std::unique_ptr<DelayLine> line_;
};

}  // namespace dist
}  // namespace tessera
