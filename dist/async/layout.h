// Asynchronous SGD with parameter servers (Dean et al. 2012, "Downpour SGD"; Li et al. 2014):
// the group's first S ranks are servers, the other W = N - S are workers.
//
//   ranks 0 .. S-1   servers: each holds one shard of the flat parameters and the optimizer
//                    state for it, and applies every gradient pushed to it, in arrival order
//   ranks S .. N-1   workers: pull the parameters, compute a gradient on their own batch, push
//                    it; no barrier between workers
//
//   flat parameters (every parameter in order, one dtype):  [ shard 0 | shard 1 | ... ]
//                                                              server 0   server 1
//
//   worker w:   pull(c) ----> forward, backward ----> push(c) ----> pull(c+1) ...
//   server s:   answers a pull once SSP allows it; applies a push at once (one optimizer step
//               on its shard, learning rate lr / W); counts how many updates came in between
//
// Stale-synchronous parallel (SSP, Ho et al. 2013): a worker may start iteration c (its pull
// is answered) only once every worker has pushed at least c - B gradients, B the staleness
// bound. B = 0 is synchronous SGD: every pull of iteration c gets the parameters as they were
// when the last push of iteration c - 1 arrived, and with plain SGD a round of W pushes of
// lr / W each is one step of the mean gradient. B = kUnbounded is plain asynchronous SGD.
//
// The messages, point-to-point on the group (so network emulation and the byte ledger see
// them): a request of 6 f64 {kind, worker, clock, lr, loss, epoch} with kRequestTag, received
// by the server from any rank; a pull is answered with the shard (kParametersTag); a push
// request is followed by the gradient's shard (kGradientTag). Per iteration a worker sends psi
// elements and receives psi (plus 2 S requests of 48 bytes).
//
// With shared batches (batch_queue.h) a worker's pull names the epoch and goes to server 0
// first, which answers with the next batch's number (one i64, kAssignmentTag) and its shard
// (also with kEpochEnd, so the worker posts both receives before asking); with a batch number
// the worker then pulls from the other servers, with kEpochEnd it tells them kEpochEnd (a
// request), and its epoch is over.
#pragma once

#include <cstdint>
#include <vector>

#include "autograd/variable.h"
#include "dist/process_group.h"
#include "tensor/tensor.h"

namespace tessera {
namespace dist {

class AsyncOptions {
 public:
  static constexpr int64_t kUnbounded = -1;
  AsyncOptions() = default;
  // S: the group's first S ranks are servers (>= 1 and fewer than the group's ranks).
  AsyncOptions& servers(int s) { servers_ = s; return *this; }
  // B: a worker starts iteration c only once every worker has pushed c - B gradients (SSP);
  // 0 is synchronous SGD, kUnbounded plain asynchronous SGD.
  AsyncOptions& staleness_bound(int64_t b) { bound_ = b; return *this; }
  // Zhang et al. 2016: each push's learning rate divided by its staleness tau (the updates
  // applied between its pull and its push), when tau > 1.
  AsyncOptions& staleness_aware_lr(bool on) { aware_ = on; return *this; }
  // Batches from a queue on server 0 (batch_queue.h) instead of a fixed shard per worker:
  // ParameterServer::serve_epoch and AsyncWorker::pull_batch. Needs the unbounded staleness
  // (a bound B keeps every worker within B iterations of the slowest over the whole run, so a
  // fast worker could never take a straggler's batches).
  AsyncOptions& shared_batches(bool on) { shared_ = on; return *this; }
  int servers() const { return servers_; }
  bool shared_batches() const { return shared_; }
  int64_t staleness_bound() const { return bound_; }
  bool bounded() const { return bound_ != kUnbounded; }
  bool staleness_aware_lr() const { return aware_; }

 private:
  int servers_ = 1;
  int64_t bound_ = kUnbounded;
  bool aware_ = false, shared_ = false;
};

// Who is a server, who a worker, and which elements of the flat parameters each server holds.
class ParameterServerLayout {
 public:
  // Throws, naming the values, unless 1 <= servers < group_size and numel >= servers, or on a
  // staleness bound below kUnbounded.
  ParameterServerLayout(int group_size, const AsyncOptions& options, int64_t numel);

  int servers() const { return servers_; }
  int workers() const { return group_size_ - servers_; }
  bool is_server(int rank) const { return rank < servers_; }
  int worker_index(int rank) const { return rank - servers_; }
  int worker_rank(int worker) const { return servers_ + worker; }
  int64_t numel() const { return numel_; }
  int64_t shard_offset(int server) const { return offsets_[server]; }
  int64_t shard_numel(int server) const { return counts_[server]; }
  // The all-gather counts that assemble the flat parameters: shards on servers, 0 on workers.
  std::vector<int64_t> gather_counts() const;

 private:
  int group_size_, servers_;
  int64_t numel_;
  std::vector<int64_t> counts_, offsets_;
};

// What a worker asks a server (kEpochEnd: shared batches, this worker's epoch is over).
enum class RequestKind { kPull = 1, kPush = 2, kDone = 3, kEpochEnd = 4 };
struct Request {
  RequestKind kind = RequestKind::kPull;
  int worker = 0;      // the worker's index (0 .. W-1), not its rank
  int64_t clock = 0;   // the iteration: pushes this worker had made before this request
  double lr = 0;       // push: the worker's learning rate for this gradient
  double loss = 0;     // push: the batch loss the worker reports
  int64_t epoch = -1;  // shared batches: the epoch of a pull or kEpochEnd; -1 otherwise
  static constexpr int64_t kElements = 6;
  Tensor encode() const;  // f64 [6]
  // Throws, naming the values, on a malformed request (unknown kind, worker out of range).
  static Request decode(const Tensor& message, int workers);
};
constexpr int kRequestTag = 0x5053;
constexpr int kParametersTag = 0x5054;
constexpr int kGradientTag = 0x5055;
constexpr int kAssignmentTag = 0x5056;
constexpr int kStateTag = 0x5057;  // a server's optimizer state sent to server 0 (checkpoints)

// Parameters of one floating dtype, all on one device: the checked common dtype.
DType flat_dtype(const std::vector<Variable>& params, const char* who);
// The parameters laid end to end (a new tensor), and the inverse (writes each parameter).
Tensor flatten(const std::vector<Variable>& params);
void unflatten(const Tensor& flat, const std::vector<Variable>& params);

// Collective over the group (servers and workers): every rank's `params` become the servers'
// shards (an all-gather in which workers send nothing). `shard`: the server's, or an empty
// tensor on a worker.
void gather_server_shards(const ParameterServerLayout& layout, ProcessGroup& group,
                          const Tensor& shard, const std::vector<Variable>& params);
// Collective over the group: the floating-point `buffers` (BatchNorm's running statistics)
// become their mean over the workers, on every rank (servers hold no statistics of their own).
void average_worker_buffers(const ParameterServerLayout& layout, ProcessGroup& group,
                            const std::vector<Variable>& buffers);

}  // namespace dist
}  // namespace tessera
