#include "dist/process_group_nccl.h"

#include <algorithm>
#include <cstring>
#include <functional>

#include "dist/device_groups.h"
#include "dist/nccl_check.h"
#include "tensor/accelerator.h"
#include "tensor/ops.h"
#include "tensor/stream.h"

namespace tessera {
namespace dist {

struct ProcessGroupNCCL::State {
  ncclComm_t comm = nullptr;
  Stream stream;  // the communication stream
};

namespace {

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case kF32: return ncclFloat32;
    case kF64: return ncclFloat64;
    case kF16: return ncclFloat16;
    case kBF16: return ncclBfloat16;
    case kI64: return ncclInt64;
    case kI32: return ncclInt32;
    case kU8:
    case kBool: return ncclUint8;
  }
  TS_FAIL("NCCL: unsupported dtype ", dtype);
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kMean: return ncclAvg;
    case ReduceOp::kMax: return ncclMax;
    case ReduceOp::kMin: return ncclMin;
    default: break;
  }
  TS_FAIL("NCCL: not a collective ReduceOp (check_reduce_op)");
}

// Done when the communication stream passes `done`; wait() orders the caller's stream after
// it (or, for a barrier, blocks the host).
class NcclWork final : public Work {
 public:
  NcclWork(Device device, std::vector<Tensor> keep_alive, bool host_wait)
      : device_(device), keep_alive_(std::move(keep_alive)), host_wait_(host_wait) {}
  // Dropped without wait(): the tensors it holds go back to the allocator now, so the caller's
  // stream must still not reuse them before NCCL is done with them.
  ~NcclWork() override {
    if (waited_) return;
    try {
      done_.block(current_stream(device_));
    } catch (...) {  // a destructor must not throw; the CUDA error resurfaces at the next call
    }
  }
  Event& done() { return done_; }
  void wait() override {
    if (host_wait_) {
      done_.synchronize();
    } else {
      done_.block(current_stream(device_));
    }
    waited_ = true;
  }
  bool is_completed() override { return done_.query(); }

 private:
  Device device_;
  Event done_;
  std::vector<Tensor> keep_alive_;
  bool host_wait_;
  bool waited_ = false;
};

void* ptr(const Tensor& t) { return t.numel() > 0 ? t.raw_data() : nullptr; }

}  // namespace

ProcessGroupNCCL::ProcessGroupNCCL(const std::shared_ptr<ProcessGroup>& bootstrap,
                                   Device device)
    : state_(std::make_unique<State>()),
      rank_(bootstrap->rank()),
      size_(bootstrap->size()),
      world_ranks_(bootstrap->world_ranks()),
      device_(device) {
  TS_CHECK(device.is_cuda(), "ProcessGroupNCCL: expected a CUDA device, got ", device);
  check_device_exists(device);
  DeviceGuard guard(device);
  ncclUniqueId id;
  if (rank_ == 0) NCCL_CHECK(ncclGetUniqueId(&id));
  Tensor bytes = empty({static_cast<int64_t>(sizeof(id))}, kU8);
  if (rank_ == 0) std::memcpy(bytes.raw_data(), &id, sizeof(id));
  bootstrap->broadcast(bytes, 0)->wait();
  std::memcpy(&id, bytes.raw_data(), sizeof(id));
  NCCL_CHECK(ncclCommInitRank(&state_->comm, size_, id, rank_));
  state_->stream = Stream::create(device);
}

ProcessGroupNCCL::~ProcessGroupNCCL() {
  if (state_ && state_->comm != nullptr) {
    try {
      state_->stream.synchronize();
    } catch (...) {  // a destructor must not throw; the CUDA error resurfaces at the next call
    }
    DeviceGuard guard(device_);
    ncclCommDestroy(state_->comm);
  }
}

namespace {

// Runs `enqueue` on the communication stream, ordered after the caller's current stream.
std::shared_ptr<Work> launch(const ProcessGroupNCCL& group, const Stream& comm_stream,
                             std::vector<Tensor> tensors, bool host_wait,
                             const std::function<void(cudaStream_t)>& enqueue) {
  for (const Tensor& t : tensors) {
    TS_CHECK(t.device() == group.device(), "ProcessGroupNCCL on ", group.device(),
             " got a tensor on ", t.device());
    TS_CHECK(t.is_contiguous(), "ProcessGroupNCCL: tensors must be contiguous, got shape ",
             t.shape(), " strides ", t.strides());
  }
  const Device d = group.device();
  DeviceGuard guard(d);
  Event inputs_ready;
  inputs_ready.record(current_stream(d));
  inputs_ready.block(comm_stream);
  auto work = std::make_shared<NcclWork>(d, std::move(tensors), host_wait);
  enqueue(static_cast<cudaStream_t>(comm_stream.native_handle()));
  work->done().record(comm_stream);
  return work;
}

}  // namespace

std::shared_ptr<Work> ProcessGroupNCCL::all_reduce(const Tensor& tensor, ReduceOp op) {
  check_reduce_op(op, tensor.dtype(), "all_reduce");
  auto work = launch(*this, state_->stream, {tensor}, false, [&](cudaStream_t s) {
    NCCL_CHECK(ncclAllReduce(ptr(tensor), ptr(tensor), tensor.numel(),
                                nccl_type(tensor.dtype()), nccl_op(op), state_->comm, s));
  });
  ledger().record(CollectiveKind::kAllReduce,
                  2 * (size_ - 1) * static_cast<int64_t>(tensor.nbytes()) / size_);
  return work;
}

std::shared_ptr<Work> ProcessGroupNCCL::reduce_scatter(const Tensor& input, const Tensor& output,
                                                       const std::vector<int64_t>& counts,
                                                       ReduceOp op) {
  check_reduce_op(op, input.dtype(), "reduce_scatter");
  TS_CHECK(static_cast<int>(counts.size()) == size_, "reduce_scatter: ", counts.size(),
           " counts for ", size_, " ranks");
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  TS_CHECK(input.numel() == total && output.numel() == counts[rank_],
           "reduce_scatter: input has ", input.numel(), " elements (counts sum to ", total,
           "), output ", output.numel(), " (this rank's count is ", counts[rank_], ")");
  TS_CHECK(input.dtype() == output.dtype(), "reduce_scatter: input ", input.dtype(),
           " and output ", output.dtype(), " differ");
  const bool even = std::all_of(counts.begin(), counts.end(),
                                [&](int64_t c) { return c == counts[0]; });
  auto work = launch(*this, state_->stream, {input, output}, false, [&](cudaStream_t s) {
    const ncclDataType_t type = nccl_type(input.dtype());
    if (even) {
      NCCL_CHECK(ncclReduceScatter(ptr(input), ptr(output), counts[0], type, nccl_op(op),
                                      state_->comm, s));
      return;
    }
    NCCL_CHECK(ncclGroupStart());
    int64_t offset = 0;
    for (int r = 0; r < size_; ++r) {
      const char* segment = static_cast<const char*>(ptr(input)) + offset * input.element_size();
      NCCL_CHECK(ncclReduce(segment, ptr(output), counts[r], type, nccl_op(op), r,
                               state_->comm, s));
      offset += counts[r];
    }
    NCCL_CHECK(ncclGroupEnd());
  });
  ledger().record(CollectiveKind::kReduceScatter,
                  (size_ - 1) * static_cast<int64_t>(input.nbytes()) / size_);
  return work;
}

std::shared_ptr<Work> ProcessGroupNCCL::all_gather(const Tensor& input, const Tensor& output,
                                                   const std::vector<int64_t>& counts) {
  TS_CHECK(static_cast<int>(counts.size()) == size_, "all_gather: ", counts.size(),
           " counts for ", size_, " ranks");
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  TS_CHECK(output.numel() == total && input.numel() == counts[rank_], "all_gather: output has ",
           output.numel(), " elements (counts sum to ", total, "), input ", input.numel(),
           " (this rank's count is ", counts[rank_], ")");
  const bool even = std::all_of(counts.begin(), counts.end(),
                                [&](int64_t c) { return c == counts[0]; });
  auto work = launch(*this, state_->stream, {input, output}, false, [&](cudaStream_t s) {
    const ncclDataType_t type = nccl_type(input.dtype());
    if (even) {
      NCCL_CHECK(ncclAllGather(ptr(input), ptr(output), counts[0], type, state_->comm, s));
      return;
    }
    NCCL_CHECK(ncclGroupStart());
    int64_t offset = 0;
    for (int r = 0; r < size_; ++r) {
      char* segment = static_cast<char*>(ptr(output)) + offset * output.element_size();
      NCCL_CHECK(ncclBroadcast(r == rank_ ? ptr(input) : segment, segment, counts[r], type, r,
                                  state_->comm, s));
      offset += counts[r];
    }
    NCCL_CHECK(ncclGroupEnd());
  });
  ledger().record(CollectiveKind::kAllGather,
                  (size_ - 1) * static_cast<int64_t>(output.nbytes()) / size_);
  return work;
}

std::shared_ptr<Work> ProcessGroupNCCL::broadcast(const Tensor& tensor, int root) {
  TS_CHECK(root >= 0 && root < size_, "broadcast: root ", root, " is not a rank of a group of ",
           size_);
  auto work = launch(*this, state_->stream, {tensor}, false, [&](cudaStream_t s) {
    NCCL_CHECK(ncclBroadcast(ptr(tensor), ptr(tensor), tensor.numel(),
                                nccl_type(tensor.dtype()), root, state_->comm, s));
  });
  ledger().record(CollectiveKind::kBroadcast,
                  rank_ == root ? static_cast<int64_t>(tensor.nbytes()) : 0);
  return work;
}

std::shared_ptr<Work> ProcessGroupNCCL::send(const Tensor& tensor, int dst, int /*tag*/) {
  TS_CHECK(dst >= 0 && dst < size_ && dst != rank_, "send: bad destination rank ", dst);
  auto work = launch(*this, state_->stream, {tensor}, false, [&](cudaStream_t s) {
    NCCL_CHECK(ncclSend(ptr(tensor), tensor.numel(), nccl_type(tensor.dtype()), dst,
                           state_->comm, s));
  });
  ledger().record(CollectiveKind::kSendRecv, static_cast<int64_t>(tensor.nbytes()));
  return work;
}

std::shared_ptr<Work> ProcessGroupNCCL::recv(const Tensor& tensor, int src, int /*tag*/) {
  TS_CHECK(src >= 0 && src < size_ && src != rank_, "recv: bad source rank ", src);
  return launch(*this, state_->stream, {tensor}, false, [&](cudaStream_t s) {
    NCCL_CHECK(ncclRecv(ptr(tensor), tensor.numel(), nccl_type(tensor.dtype()), src,
                           state_->comm, s));
  });
}

std::shared_ptr<Work> ProcessGroupNCCL::barrier() {
  Tensor one = ones({1}, device_);
  return launch(*this, state_->stream, {one}, true, [&](cudaStream_t s) {
    NCCL_CHECK(ncclAllReduce(ptr(one), ptr(one), 1, ncclFloat32, ncclSum, state_->comm, s));
  });
}

namespace {

// Makes group_for_device() create NCCL groups for CUDA tensors in this build.
const bool registered = [] {
  register_device_group_factory(
      DeviceType::kCUDA,
      [](const std::shared_ptr<ProcessGroup>& bootstrap, Device device) -> std::shared_ptr<ProcessGroup> {
        return std::make_shared<ProcessGroupNCCL>(bootstrap, device);
      });
  return true;
}();

}  // namespace

}  // namespace dist
}  // namespace tessera
