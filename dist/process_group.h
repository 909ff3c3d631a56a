// ProcessGroup: a set of ranks and the collectives they run together.
//
// Every member must issue the same collectives in the same order (the contract of MPI and
// NCCL). Each call returns a Work at once; the operation runs on the group's communication
// thread (or stream) in issue order, so it overlaps with computation until someone waits.
// Tensors are flat views of contiguous memory and must stay untouched until the Work is done.
//
// Sizes need not divide by the group size: reduce_scatter and all_gather take per-rank counts
// (balanced_counts() splits n as evenly as possible, the default).
//
// A group can emulate a slower network (network_emulation.h): set_network_emulation() makes
// every message it sends take at least latency + bytes / bandwidth.
#pragma once

#include <memory>
#include <vector>

#include "dist/byte_ledger.h"
#include "dist/network_emulation.h"
#include "dist/work.h"
#include "tensor/kinds.h"
#include "tensor/tensor.h"

namespace tessera {
namespace dist {

// The collectives reduce with the one ReduceOp of tensor/kinds.h: kSum, kMean (the sum divided
// by the group size, for floating-point tensors), kMax or kMin. (Its other members, argmax and
// variance, are not collective reductions.)
using ReduceOp = ::tessera::ReduceOp;

// Throws, naming the collective, unless `op` is one of the four above and fits `dtype`.
void check_reduce_op(ReduceOp op, DType dtype, const char* collective);

// n split into `parts` counts that differ by at most one, larger ones first.
std::vector<int64_t> balanced_counts(int64_t n, int parts);

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The ranks of this group in the world, indexed by group rank.
  virtual const std::vector<int>& world_ranks() const = 0;

  // In place: every rank ends with the reduction of all ranks' tensors.
  virtual std::shared_ptr<Work> all_reduce(const Tensor& tensor, ReduceOp op = ReduceOp::kSum) = 0;
  // input holds sum(counts) elements on every rank; output (counts[rank] elements) receives
  // this rank's segment of the reduction.
  virtual std::shared_ptr<Work> reduce_scatter(const Tensor& input, const Tensor& output,
                                               const std::vector<int64_t>& counts,
                                               ReduceOp op = ReduceOp::kSum) = 0;
  // input holds counts[rank] elements; output (sum(counts)) receives every rank's, in rank order.
  virtual std::shared_ptr<Work> all_gather(const Tensor& input, const Tensor& output,
                                           const std::vector<int64_t>& counts) = 0;
  virtual std::shared_ptr<Work> broadcast(const Tensor& tensor, int root) = 0;
  // Point to point, matched by (peer, tag). recv's src may be kAnySource (MPI groups only): the
  // first message with that tag from whichever rank (the message should say who sent it; a
  // parameter server's requests do).
  static constexpr int kAnySource = -1;
  virtual std::shared_ptr<Work> send(const Tensor& tensor, int dst, int tag) = 0;
  virtual std::shared_ptr<Work> recv(const Tensor& tensor, int src, int tag) = 0;
  virtual std::shared_ptr<Work> barrier() = 0;

  // Balanced-count forms.
  std::shared_ptr<Work> reduce_scatter(const Tensor& input, const Tensor& output,
                                       ReduceOp op = ReduceOp::kSum);
  std::shared_ptr<Work> all_gather(const Tensor& input, const Tensor& output);

  // Network emulation, off by default. Applies to what is issued after the call (a collective
  // already queued keeps the setting it was issued under). Every member must set the same; set
  // it on the thread that issues this group's operations, not while another thread issues them.
  // Groups that cannot emulate (the base, NCCL) refuse a setting that is on. See also
  // dist::set_network_emulation (environment.h), which sets every MPI group.
  virtual void set_network_emulation(const NetworkEmulation& emulation);
  virtual NetworkEmulation network_emulation() const { return NetworkEmulation{}; }

  ByteLedger& ledger() { return ledger_; }

 private:
  ByteLedger ledger_;
};

}  // namespace dist
}  // namespace tessera
