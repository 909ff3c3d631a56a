#include "dist/process_group_mpi.h"

#include <algorithm>
#include <climits>
#include <numeric>

#include "dist/collective_timeout.h"
#include "dist/mpi_check.h"
#include "dist/mpi_request.h"
#include "dist/ring_schedule.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {

namespace {

constexpr int kRingTag = 7001;
constexpr int kBroadcastTag = 7002;
constexpr int64_t kMaxMessage = int64_t{1} << 30;  // bytes per MPI call (counts are ints)

int mod(int a, int n) { return ((a % n) + n) % n; }

std::vector<int64_t> offsets_of(const std::vector<int64_t>& counts) {
  std::vector<int64_t> offsets(counts.size() + 1, 0);
  std::partial_sum(counts.begin(), counts.end(), offsets.begin() + 1);
  return offsets;
}

// dst (op)= src, elementwise.
void reduce_into(const Tensor& dst, const Tensor& src, ReduceOp op) {
  Tensor d = dst;
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kMean: add_(d, src); break;
    case ReduceOp::kMax: d.copy_(maximum(dst, src)); break;
    case ReduceOp::kMin: d.copy_(minimum(dst, src)); break;
    default: TS_INTERNAL_ASSERT(false, "reduce_into: not a collective ReduceOp (check_reduce_op)");
  }
}

void check_flat(const Tensor& t, const char* op, const char* what) {
  TS_CHECK(t.defined(), op, ": ", what, " is undefined");
  TS_CHECK(t.is_contiguous(), op, ": ", what, " ", t.str(), " must be contiguous");
}

// The tensor's bytes on the host: itself if on the CPU, else a copy.
Tensor host(const Tensor& t) { return t.device().is_cpu() ? t.view({t.numel()}) : t.cpu().view({t.numel()}); }

// Copies a host result back when the tensor lives on a device.
void write_back(const Tensor& t, const Tensor& host_flat) {
  if (!t.device().is_cpu()) Tensor(t).copy_(host_flat.view(t.shape()));
}

// "ranks 0-3, world", "ranks 0,2", "ranks 0-1,4-5": whose collectives a communication thread
// runs, for its trace track.
std::string group_name(const std::vector<int>& ranks, bool world) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (i > 0) text += ",";
    text += std::to_string(ranks[i]);
    if (j > i) text += "-" + std::to_string(ranks[j]);
    i = j + 1;
  }
  return world ? text + ", world" : text;
}

}  // namespace

ProcessGroupMPI::ProcessGroupMPI(MPI_Comm comm, std::vector<int> world_ranks)
    : comm_(comm), world_ranks_(std::move(world_ranks)) {
  MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  MPI_CHECK(MPI_Comm_size(comm_, &size_));
  MPI_CHECK(MPI_Comm_dup(comm_, &p2p_comm_));
  MPI_CHECK(MPI_Comm_set_errhandler(p2p_comm_, MPI_ERRORS_RETURN));
  TS_INTERNAL_ASSERT(static_cast<int>(world_ranks_.size()) == size_);
  thread_ = std::make_unique<CommThread>(group_name(world_ranks_, comm_ == MPI_COMM_WORLD));
}

ProcessGroupMPI::~ProcessGroupMPI() { shutdown(); }

void ProcessGroupMPI::shutdown() {
  if (line_) line_->shutdown();  // posts every held send before the communicators go
  if (thread_) thread_->shutdown();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (p2p_comm_ != MPI_COMM_NULL) MPI_Comm_free(&p2p_comm_);
  if (comm_ != MPI_COMM_NULL && comm_ != MPI_COMM_WORLD) MPI_Comm_free(&comm_);
  p2p_comm_ = comm_ = MPI_COMM_NULL;
}

void ProcessGroupMPI::check_counts(const std::vector<int64_t>& counts, const char* op) const {
  TS_CHECK(static_cast<int>(counts.size()) == size_, op, ": ", counts.size(),
           " counts for a group of ", size_);
  for (int64_t c : counts) TS_CHECK(c >= 0, op, ": negative count in ", counts);
}

std::string ProcessGroupMPI::p2p_description(const char* direction, const Tensor& t, int peer,
                                             int tag) const {
  return ::tessera::detail::str(direction, " ",
                                peer == kAnySource ? std::string("any rank")
                                                   : "rank " + std::to_string(world_ranks_[peer]),
                                " (", t.numel(), " elements of ", dtype_name(t.dtype()), ", tag ",
                                tag, ", on rank ", world_ranks_[rank_], ")");
}

std::string ProcessGroupMPI::describe(const char* collective, const Tensor& t) {
  return ::tessera::detail::str(collective, " #", ++collectives_issued_, " (", t.numel(), " elements of ",
                     dtype_name(t.dtype()), " on rank ", rank_, " of a group of ", size_, ")");
}

void ProcessGroupMPI::check_arrival(int rc, const MPI_Status& status, int expected,
                                    int src) const {
  // Ranks that disagree on a collective's size (or call different collectives) send pieces of
  // other sizes than the receiver posted: too long is MPI_ERR_TRUNCATE, too short a short
  // count. Either would corrupt memory or hang later; name the collective and stop here.
  int received = -1;
  if (rc == MPI_SUCCESS) MPI_Get_count(&status, MPI_BYTE, &received);
  const bool truncated = rc != MPI_SUCCESS && status.MPI_ERROR == MPI_ERR_TRUNCATE;
  TS_CHECK(!truncated && (rc != MPI_SUCCESS || received == expected), running_, ": rank ", rank_,
           " expected a piece of ", expected, " bytes from rank ", src, " but ",
           truncated ? std::string("a longer one") : std::to_string(received) + " bytes",
           " arrived: the ranks called this collective with different sizes or dtypes, or "
           "different collectives in this order. Every rank of a group must issue the same "
           "collectives, in the same order, with the same sizes and dtypes");
  if (rc != MPI_SUCCESS) detail::mpi_fail(rc, "MPI_Testall", __FILE__, __LINE__);
}

void ProcessGroupMPI::set_network_emulation(const NetworkEmulation& emulation) {
  emulation.check("set_network_emulation");
  emulation_ = emulation;
  if (emulation.enabled() && size_ > 1 && !line_) line_ = std::make_unique<DelayLine>();
  // The communication thread takes the setting between the collectives issued before this call
  // and those issued after it.
  thread_->submit([this, emulation] {
    comm_emulation_ = emulation;
    comm_emulating_ = emulation.enabled();
  });
}

void ProcessGroupMPI::hold_message(CollectiveKind kind, int64_t bytes) {
  const double seconds = comm_emulation_.message_seconds(bytes);
  ledger().add_emulated_seconds(kind, seconds);
  hold_until(after_seconds(EmulationClock::now(), seconds));
}

void ProcessGroupMPI::wait_out_step(CollectiveKind kind, EmulationClock::time_point posted,
                                    int64_t sent, int64_t received) {
  ledger().add_emulated_seconds(kind, comm_emulation_.message_seconds(sent));
  hold_until(after_seconds(posted, comm_emulation_.message_seconds(std::max(sent, received))));
}

void ProcessGroupMPI::sendrecv(const Tensor& send, int dst, const Tensor& recv, int src,
                               CollectiveKind kind) {
  const char* s = static_cast<const char*>(send.numel() ? send.raw_data() : nullptr);
  char* r = static_cast<char*>(recv.numel() ? recv.raw_data() : nullptr);
  int64_t send_left = static_cast<int64_t>(send.nbytes());
  int64_t recv_left = static_cast<int64_t>(recv.nbytes());
  // Large buffers go in pieces of at most kMaxMessage bytes (MPI counts are ints); both sides
  // cut the same way, so the pieces pair up.
  do {
    const int sn = static_cast<int>(std::min(send_left, kMaxMessage));
    const int rn = static_cast<int>(std::min(recv_left, kMaxMessage));
    std::vector<MPI_Request> requests(2);
    std::vector<MPI_Status> statuses;
    const EmulationClock::time_point posted =
        comm_emulating_ ? EmulationClock::now() : EmulationClock::time_point();
    MPI_CHECK(MPI_Irecv(r, rn, MPI_BYTE, src, kRingTag, comm_, &requests[0]));
    MPI_CHECK(MPI_Isend(s, sn, MPI_BYTE, dst, kRingTag, comm_, &requests[1]));
    const WaitingFor waiting(running_, world_ranks_[src]);  // for a timeout's message
    const int rc = wait_all(requests, statuses);  // sizes `statuses`: call it first
    check_arrival(rc, statuses[0], rn, src);
    // Both directions at once (a full-duplex link): one message time for the step.
    if (comm_emulating_) wait_out_step(kind, posted, sn, rn);
    s += sn;
    r += rn;
    send_left -= sn;
    recv_left -= rn;
  } while (send_left > 0 || recv_left > 0);
}

void ProcessGroupMPI::ring_reduce_scatter(const Tensor& buffer, const std::vector<int64_t>& counts,
                                          ReduceOp op, CollectiveKind kind) {
  const std::vector<int64_t> off = offsets_of(counts);
  const int right = mod(rank_ + 1, size_), left = mod(rank_ - 1, size_);
  const int64_t largest = *std::max_element(counts.begin(), counts.end());
  const Tensor incoming = empty({largest}, buffer.dtype());
  for (int s = 0; s < size_ - 1; ++s) {
    const RingStep step = reduce_scatter_step(rank_, size_, s);
    const int out_chunk = step.send_chunk, in_chunk = step.receive_chunk;
    const Tensor out = buffer.narrow(0, off[out_chunk], counts[out_chunk]);
    const Tensor in = incoming.narrow(0, 0, counts[in_chunk]);
    sendrecv(out, right, in, left, kind);
    ledger().add_bytes(kind, static_cast<int64_t>(out.nbytes()));
    reduce_into(buffer.narrow(0, off[in_chunk], counts[in_chunk]), in, op);
  }
}

void ProcessGroupMPI::ring_all_gather(const Tensor& buffer, const std::vector<int64_t>& counts,
                                      CollectiveKind kind) {
  const std::vector<int64_t> off = offsets_of(counts);
  const int right = mod(rank_ + 1, size_), left = mod(rank_ - 1, size_);
  for (int s = 0; s < size_ - 1; ++s) {
    const RingStep step = all_gather_step(rank_, size_, s);
    const int out_chunk = step.send_chunk, in_chunk = step.receive_chunk;
    const Tensor out = buffer.narrow(0, off[out_chunk], counts[out_chunk]);
    sendrecv(out, right, buffer.narrow(0, off[in_chunk], counts[in_chunk]), left, kind);
    ledger().add_bytes(kind, static_cast<int64_t>(out.nbytes()));
  }
}

std::shared_ptr<Work> ProcessGroupMPI::all_reduce(const Tensor& tensor, ReduceOp op) {
  check_flat(tensor, "all_reduce", "tensor");
  check_reduce_op(op, tensor.dtype(), "all_reduce");
  ledger().record(CollectiveKind::kAllReduce, 0);
  const std::string what = describe("all_reduce", tensor);
  return thread_->submit([this, tensor, op, what]() {
    running_ = what;
    const Tensor buf = host(tensor);
    if (size_ > 1 && buf.numel() > 0) {
      const std::vector<int64_t> counts = balanced_counts(buf.numel(), size_);
      ring_reduce_scatter(buf, counts, op, CollectiveKind::kAllReduce);
      ring_all_gather(buf, counts, CollectiveKind::kAllReduce);
    }
    if (op == ReduceOp::kMean && size_ > 1) {
      Tensor b = buf;
      mul_(b, 1.0 / size_);
    }
    write_back(tensor, buf);
  });
}

std::shared_ptr<Work> ProcessGroupMPI::reduce_scatter(const Tensor& input, const Tensor& output,
                                                      const std::vector<int64_t>& counts,
                                                      ReduceOp op) {
  check_flat(input, "reduce_scatter", "input");
  check_flat(output, "reduce_scatter", "output");
  check_counts(counts, "reduce_scatter");
  const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  TS_CHECK(input.numel() == total && output.numel() == counts[rank_], "reduce_scatter: input has ",
           input.numel(), " elements and output ", output.numel(), ", but counts ", counts,
           " need ", total, " and ", counts[rank_], " (rank ", rank_, ")");
  TS_CHECK(input.dtype() == output.dtype(), "reduce_scatter: input is ", input.dtype(),
           ", output ", output.dtype());
  check_reduce_op(op, input.dtype(), "reduce_scatter");
  ledger().record(CollectiveKind::kReduceScatter, 0);
  const std::string what = describe("reduce_scatter", input);
  return thread_->submit([this, input, output, counts, op, what]() {
    running_ = what;
    // Work on a copy: the input is left as it was.
    const Tensor buf = host(input).clone();
    if (size_ > 1) ring_reduce_scatter(buf, counts, op, CollectiveKind::kReduceScatter);
    const std::vector<int64_t> off = offsets_of(counts);
    Tensor mine = buf.narrow(0, off[rank_], counts[rank_]);
    if (op == ReduceOp::kMean && size_ > 1) mul_(mine, 1.0 / size_);
    Tensor(output).copy_(mine.view(output.shape()));
  });
}

std::shared_ptr<Work> ProcessGroupMPI::all_gather(const Tensor& input, const Tensor& output,
                                                  const std::vector<int64_t>& counts) {
  check_flat(input, "all_gather", "input");
  check_flat(output, "all_gather", "output");
  check_counts(counts, "all_gather");
  const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  TS_CHECK(output.numel() == total && input.numel() == counts[rank_], "all_gather: input has ",
           input.numel(), " elements and output ", output.numel(), ", but counts ", counts,
           " need ", counts[rank_], " and ", total, " (rank ", rank_, ")");
  TS_CHECK(input.dtype() == output.dtype(), "all_gather: input is ", input.dtype(), ", output ",
           output.dtype());
  ledger().record(CollectiveKind::kAllGather, 0);
  const std::string what = describe("all_gather", output);
  return thread_->submit([this, input, output, counts, what]() {
    running_ = what;
    const Tensor buf = output.device().is_cpu() ? output.view({output.numel()})
                                                : empty({output.numel()}, output.dtype());
    const std::vector<int64_t> off = offsets_of(counts);
    buf.narrow(0, off[rank_], counts[rank_]).copy_(host(input));
    if (size_ > 1) ring_all_gather(buf, counts, CollectiveKind::kAllGather);
    write_back(output, buf);
  });
}

std::shared_ptr<Work> ProcessGroupMPI::broadcast(const Tensor& tensor, int root) {
  check_flat(tensor, "broadcast", "tensor");
  TS_CHECK(root >= 0 && root < size_, "broadcast: root ", root, " outside a group of ", size_);
  ledger().record(CollectiveKind::kBroadcast, 0);
  const std::string what = describe("broadcast", tensor);
  return thread_->submit([this, tensor, root, what]() {
    running_ = what;
    const Tensor buf = host(tensor);
    // Binomial tree: in round k, ranks that have the data (relative rank < 2^k) send to
    // relative rank + 2^k. log2(N) rounds; every rank receives once.
    const int vr = mod(rank_ - root, size_);
    char* data = static_cast<char*>(buf.numel() ? buf.raw_data() : nullptr);
    const int64_t bytes = static_cast<int64_t>(buf.nbytes());
    for (int mask = 1; mask < size_; mask <<= 1) {
      for (int64_t at = 0; at < bytes || at == 0; at += kMaxMessage) {
        const int n = static_cast<int>(std::min(bytes - at, kMaxMessage));
        std::vector<MPI_Request> request(1);
        std::vector<MPI_Status> statuses;
        if (vr < mask && vr + mask < size_) {
          if (comm_emulating_) hold_message(CollectiveKind::kBroadcast, n);
          const int to = mod(vr + mask + root, size_);
          MPI_CHECK(MPI_Isend(data + at, n, MPI_BYTE, to, kBroadcastTag, comm_, &request[0]));
          const WaitingFor waiting(running_, world_ranks_[to]);
          MPI_CHECK(wait_all(request, statuses));
          ledger().add_bytes(CollectiveKind::kBroadcast, n);
        } else if (vr >= mask && vr < 2 * mask) {
          const int from = mod(vr - mask + root, size_);
          MPI_CHECK(MPI_Irecv(data + at, n, MPI_BYTE, from, kBroadcastTag, comm_, &request[0]));
          const WaitingFor waiting(running_, world_ranks_[from]);
          const int rc = wait_all(request, statuses);
          check_arrival(rc, statuses[0], n, from);
        }
        if (bytes == 0) break;
      }
    }
    write_back(tensor, buf);
  });
}

std::shared_ptr<Work> ProcessGroupMPI::send(const Tensor& tensor, int dst, int tag) {
  check_flat(tensor, "send", "tensor");
  TS_CHECK(dst >= 0 && dst < size_ && dst != rank_, "send: bad destination ", dst,
           " from rank ", rank_, " of ", size_);
  TS_CHECK(tensor.nbytes() <= static_cast<size_t>(INT_MAX), "send: ", tensor.nbytes(),
           " bytes is more than one message can carry");
  ledger().record(CollectiveKind::kSendRecv, static_cast<int64_t>(tensor.nbytes()));
  const Tensor buf = host(tensor);
  if (line_) return send_held(buf, dst, tag);
  // Posted now, on the caller's thread, and completed by whoever waits (mpi_request.h).
  MPI_Request request;
  MPI_CHECK(MPI_Isend(buf.numel() ? buf.raw_data() : nullptr, static_cast<int>(buf.nbytes()),
                      MPI_BYTE, dst, tag, p2p_comm_, &request));
  return std::make_shared<RequestWork>(request, std::vector<Tensor>{buf}, nullptr,
                                       p2p_description("send to", tensor, dst, tag),
                                       world_ranks_[dst]);
}

std::shared_ptr<Work> ProcessGroupMPI::send_held(const Tensor& buf, int dst, int tag) {
  const int64_t bytes = static_cast<int64_t>(buf.nbytes());
  if (emulation_.enabled()) {
    ledger().add_emulated_seconds(CollectiveKind::kSendRecv, emulation_.message_seconds(bytes));
  }
  // The line posts it when its time comes; the receiver needs nothing: the data cannot arrive
  // before then.
  auto pending = std::make_shared<PendingRequest>();
  line_->add(dst, bytes, emulation_, [pending, buf, dst, tag, comm = p2p_comm_] {
    MPI_Request request = MPI_REQUEST_NULL;
    const int rc = MPI_Isend(buf.numel() ? buf.raw_data() : nullptr, static_cast<int>(buf.nbytes()),
                             MPI_BYTE, dst, tag, comm, &request);
    pending->set(request, rc);
  });
  return std::make_shared<RequestWork>(pending, std::vector<Tensor>{buf},
                                       p2p_description("send to", buf, dst, tag),
                                       world_ranks_[dst]);
}

std::shared_ptr<Work> ProcessGroupMPI::recv(const Tensor& tensor, int src, int tag) {
  check_flat(tensor, "recv", "tensor");
  TS_CHECK(src == kAnySource || (src >= 0 && src < size_ && src != rank_), "recv: bad source ",
           src, " at rank ", rank_, " of ", size_);
  TS_CHECK(tensor.nbytes() <= static_cast<size_t>(INT_MAX), "recv: ", tensor.nbytes(),
           " bytes is more than one message can carry");
  // Device tensors receive into a host buffer, copied over once the message is in.
  const Tensor buf = tensor.device().is_cpu() ? tensor : empty({tensor.numel()}, tensor.dtype());
  MPI_Request request;
  MPI_CHECK(MPI_Irecv(buf.numel() ? buf.raw_data() : nullptr, static_cast<int>(buf.nbytes()),
                      MPI_BYTE, src == kAnySource ? MPI_ANY_SOURCE : src, tag, p2p_comm_,
                      &request));
  return std::make_shared<RequestWork>(request, std::vector<Tensor>{buf, tensor},
                                       [tensor, buf] { write_back(tensor, buf); },
                                       p2p_description("receive from", tensor, src, tag),
                                       src == kAnySource ? -1 : world_ranks_[src]);
}

MPI_Comm ProcessGroupMPI::split(int color, int key) {
  MPI_Comm out = MPI_COMM_NULL;
  thread_->submit([this, color, key, &out]() {
    MPI_CHECK(MPI_Comm_split(comm_, color, key, &out));
  })->wait();
  return out;
}

std::shared_ptr<Work> ProcessGroupMPI::barrier() {
  const std::string what = ::tessera::detail::str("barrier (group of ", size_, ", on rank ",
                                                   world_ranks_[rank_], ")");
  return thread_->submit([this, what]() {
    running_ = what;
    if (comm_emulating_ && size_ > 1) {
      // As a dissemination barrier: ceil(log2 N) rounds of empty messages, one latency each.
      int rounds = 0;
      for (int reach = 1; reach < size_; reach <<= 1) ++rounds;
      hold_until(after_seconds(EmulationClock::now(), rounds * comm_emulation_.message_seconds(0)));
    }
    std::vector<MPI_Request> request(1);
    std::vector<MPI_Status> statuses;
    MPI_CHECK(MPI_Ibarrier(comm_, &request[0]));
    const WaitingFor waiting(running_, -1);  // any rank may be the one missing
    MPI_CHECK(wait_all(request, statuses));
  });
}

}  // namespace dist
}  // namespace tessera
