// CudaBackend: device queries, copies, elementwise ops, reductions, softmax, indexing, fused
// optimizer updates and random fills, and the static registration (the NN kernels are in
// nn_ops.cc, GEMM in gemm.cc, convolution in conv.cc).
#include "tensor/cuda/cuda_backend.h"

#include "tensor/allocator.h"
#include "tensor/cuda/caching_allocator.h"
#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/cuda_streams.h"
#include "tensor/cuda/kernels.h"
#include "tensor/cuda/pinned_allocator.h"
#include "tensor/fused_updates.h"

namespace tessera {
namespace cuda {

TensorArg arg(const Tensor& t) {
  TS_CHECK(t.dim() <= kMaxDims, "CUDA kernels take tensors of at most ", kMaxDims,
           " dims, got shape ", t.shape());
  TensorArg a;
  a.data = t.numel() > 0 ? t.raw_data() : nullptr;
  a.dtype = t.dtype();
  a.ndim = static_cast<int>(t.dim());
  for (int d = 0; d < a.ndim; ++d) {
    a.sizes[d] = t.size(d);
    a.strides[d] = t.stride(d);
  }
  a.contiguous = t.is_contiguous();
  return a;
}

OnDevice::OnDevice(const Tensor& t)
    : guard(t.device()), stream(current_stream(t.device().index()).handle()) {}

int CudaBackend::device_count() { return cuda::device_count(); }
std::string CudaBackend::unavailable_reason() { return cuda::unavailable_reason(); }

void CudaBackend::synchronize(int index) {
  DeviceGuard guard(index);
  TS_CUDA_CHECK(cudaDeviceSynchronize());
}

StreamBackend* CudaBackend::streams() { return &stream_backend(); }

// ---------------------------------------------------------------------------- copies

namespace {

// Copies the bytes of two contiguous tensors of one dtype, any devices.
void copy_bytes(const Tensor& src, const Tensor& dst) {
  if (src.numel() == 0) return;
  const Tensor& gpu = dst.device().is_cuda() ? dst : src;
  OnDevice on(gpu);
  const void* from = src.raw_data();
  void* to = dst.raw_data();
  if (src.device().is_cuda() && dst.device().is_cuda()) {
    if (src.device() == dst.device()) {
      TS_CUDA_CHECK(cudaMemcpyAsync(to, from, src.nbytes(), cudaMemcpyDeviceToDevice, on.stream));
    } else {
      // The destination's stream must see the source finished: order it after the source's.
      Event ready;
      ready.record(current_stream(src.device().index()));
      ready.block(current_stream(dst.device().index()));
      TS_CUDA_CHECK(cudaMemcpyPeerAsync(to, dst.device().index(), from, src.device().index(),
                                        src.nbytes(), on.stream));
    }
  } else if (dst.device().is_cuda()) {
    // From pinned memory the copy is an async DMA (the block stays reserved until it is done);
    // from pageable memory CUDA stages the bytes before returning, so the source may go.
    TS_CUDA_CHECK(cudaMemcpyAsync(to, from, src.nbytes(), cudaMemcpyHostToDevice, on.stream));
    if (src.is_pinned()) record_pinned_use(from, Stream(dst.device().index(), on.stream));
  } else {
    TS_CUDA_CHECK(cudaMemcpyAsync(to, from, src.nbytes(), cudaMemcpyDeviceToHost, on.stream));
    TS_CUDA_CHECK(cudaStreamSynchronize(on.stream));  // the CPU reads it next
  }
}

}  // namespace

void CudaBackend::copy(const Tensor& src, const Tensor& dst) {
  TS_INTERNAL_ASSERT(src.shape() == dst.shape());
  if (src.numel() == 0) return;
  const bool same_dtype = src.dtype() == dst.dtype();
  if (src.device() == dst.device()) {  // on one GPU: a memcpy or the strided convert kernel
    if (same_dtype && src.is_contiguous() && dst.is_contiguous()) {
      if (src.raw_data() != dst.raw_data()) copy_bytes(src, dst);
      return;
    }
    OnDevice on(dst);
    launch_copy(arg(src), arg(dst), dst.numel(), on.stream);
    return;
  }
  // Between devices: convert and pack on the source side, move the bytes, unpack on the
  // destination side (each step is skipped when it has nothing to do).
  Tensor packed = src.to(dst.dtype()).contiguous();
  if (dst.is_contiguous()) {
    copy_bytes(packed, dst);
    return;
  }
  Tensor landed = empty(dst.shape(), dst.options());
  copy_bytes(packed, landed);
  Tensor(dst).copy_(landed);
}

void CudaBackend::fill(const Tensor& dst, double value) {
  OnDevice on(dst);
  launch_fill(arg(dst), value, dst.numel(), on.stream);
}

// ---------------------------------------------------------------------------- elementwise

void CudaBackend::unary(UnaryOp op, const Tensor& in, const Tensor& out, double alpha,
                        double beta) {
  TS_CHECK(in.dtype() != kBool, "unary ops are not defined on bool tensors");
  OnDevice on(out);
  launch_unary(op, arg(in), arg(out), alpha, beta, out.numel(), on.stream);
}

void CudaBackend::binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  OnDevice on(out);
  launch_binary(op, arg(a), arg(b), arg(out), out.numel(), on.stream);
}

void CudaBackend::where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  OnDevice on(out);
  launch_where(arg(cond), arg(a), arg(b), arg(out), out.numel(), on.stream);
}

// ---------------------------------------------------------------------------- reductions

void CudaBackend::reduce(ReduceOp op, const Tensor& in, const Tensor& out, int64_t correction) {
  if (in.dtype() == kBool) {
    // Bool reduces as bytes (sum counts the trues), as on the CPU.
    TS_CHECK(op != ReduceOp::kMean && op != ReduceOp::kVar, "reduce: mean/var of a bool tensor");
    const Tensor bytes = in.to(kU8);
    if (out.dtype() == kBool) {
      Tensor tmp = empty(out.shape(), TensorOptions(kU8).device(out.device()));
      reduce(op, bytes, tmp, correction);
      copy(tmp, out);
    } else {
      reduce(op, bytes, out, correction);
    }
    return;
  }
  TS_CHECK(in.size(1) > 0 || op == ReduceOp::kSum || op == ReduceOp::kMean ||
               op == ReduceOp::kVar,
           "reduce: max/min/argmax/argmin over an empty dimension");
  OnDevice on(in);
  launch_reduce(op, in.numel() ? in.raw_data() : nullptr, in.dtype(), out.raw_data(),
                out.dtype(), in.size(0), in.size(1), correction, on.stream);
}

void CudaBackend::softmax(const Tensor& in, const Tensor& out, bool log) {
  OnDevice on(in);
  launch_softmax(in.raw_data(), out.raw_data(), in.dtype(), in.size(0), in.size(1), log,
                 on.stream);
}

void CudaBackend::softmax_backward(const Tensor& grad_out, const Tensor& out,
                                   const Tensor& grad_in, bool log) {
  OnDevice on(out);
  launch_softmax_backward(grad_out.raw_data(), out.raw_data(), grad_in.raw_data(), out.dtype(),
                          out.size(0), out.size(1), log, on.stream);
}

void CudaBackend::cross_entropy(const Tensor& logits, const Tensor& target,
                                double label_smoothing, const Tensor& log_probs,
                                const Tensor& loss) {
  OnDevice on(logits);
  launch_cross_entropy(logits.raw_data(), target.data<int64_t>(), label_smoothing,
                       log_probs.raw_data(), loss.raw_data(), logits.dtype(), logits.size(0),
                       logits.size(1), on.stream);
}

void CudaBackend::cross_entropy_backward(const Tensor& log_probs, const Tensor& target,
                                         const Tensor& row_grad, double label_smoothing,
                                         const Tensor& grad_logits) {
  OnDevice on(log_probs);
  launch_cross_entropy_backward(log_probs.raw_data(), target.data<int64_t>(),
                                row_grad.raw_data(), label_smoothing, grad_logits.raw_data(),
                                log_probs.dtype(), log_probs.size(0), log_probs.size(1),
                                on.stream);
}

// ---------------------------------------------------------------------------- indexing

namespace {

// The kernel's view of a contiguous shape (sizes and row-major strides).
TensorArg contiguous_shape(const Shape& shape) {
  TS_CHECK(static_cast<int>(shape.size()) <= kMaxDims, "CUDA indexing takes at most ", kMaxDims,
           " dims, got shape ", shape);
  TensorArg a;
  a.ndim = static_cast<int>(shape.size());
  const Shape strides = contiguous_strides(shape);
  for (int d = 0; d < a.ndim; ++d) {
    a.sizes[d] = shape[d];
    a.strides[d] = strides[d];
  }
  return a;
}

}  // namespace

void CudaBackend::index_select(const Tensor& in, int64_t dim, const Tensor& index,
                               const Tensor& out) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= in.size(d);
  for (int64_t d = dim + 1; d < in.dim(); ++d) inner *= in.size(d);
  if (out.numel() == 0) return;
  OnDevice on(out);
  launch_index_select(in.raw_data(), out.raw_data(), index.data<int64_t>(), outer, in.size(dim),
                      index.numel(), inner, static_cast<int64_t>(in.element_size()), on.stream);
}

void CudaBackend::gather(const Tensor& in, int64_t dim, const Tensor& index, const Tensor& out) {
  if (out.numel() == 0) return;
  OnDevice on(out);
  launch_gather(in.raw_data(), out.raw_data(), index.data<int64_t>(),
                contiguous_shape(index.shape()), contiguous_shape(in.shape()),
                static_cast<int>(dim), in.dtype(), index.numel(), on.stream);
}

void CudaBackend::scatter_add(const Tensor& self, int64_t dim, const Tensor& index,
                              const Tensor& src) {
  if (index.numel() == 0) return;
  OnDevice on(self);
  launch_scatter_add(self.raw_data(), src.raw_data(), index.data<int64_t>(),
                     contiguous_shape(index.shape()), contiguous_shape(self.shape()),
                     static_cast<int>(dim), self.dtype(), index.numel(), on.stream);
}

// ---------------------------------------------------------------------------- optimizers

void CudaBackend::sgd_update(const Tensor& param, const Tensor& grad,
                             const Tensor& momentum_buffer, const SgdUpdate& u) {
  OnDevice on(param);
  launch_sgd_update(param.raw_data(), grad.raw_data(),
                    momentum_buffer.defined() ? momentum_buffer.raw_data() : nullptr,
                    param.dtype(), param.numel(), u, on.stream);
}

void CudaBackend::adam_update(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                              const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq,
                              const AdamUpdate& u) {
  OnDevice on(param);
  launch_adam_update(param.raw_data(), grad.raw_data(), exp_avg.raw_data(),
                     exp_avg_sq.raw_data(),
                     max_exp_avg_sq.defined() ? max_exp_avg_sq.raw_data() : nullptr,
                     param.dtype(), param.numel(), u, on.stream);
}

namespace {
void* data_or_null(const Tensor& t) { return t.defined() ? t.raw_data() : nullptr; }
}  // namespace

void CudaBackend::sgd_update_many(const std::vector<SgdTensors>& list, const SgdUpdate& u) {
  std::vector<ListSlot> slots;
  for (const SgdTensors& t : list) {
    ListSlot slot;
    slot.param = t.param.raw_data();
    slot.grad = t.grad.raw_data();
    slot.state[0] = u.momentum != 0 ? data_or_null(t.momentum_buffer) : nullptr;
    slot.numel = t.param.numel();
    slots.push_back(slot);
  }
  OnDevice on(list[0].param);
  launch_sgd_update_many(slots.data(), static_cast<int>(slots.size()), list[0].param.dtype(), u,
                         on.stream);
}

void CudaBackend::adam_update_many(const std::vector<AdamTensors>& list, const AdamUpdate& u) {
  std::vector<ListSlot> slots;
  for (const AdamTensors& t : list) {
    ListSlot slot;
    slot.param = t.param.raw_data();
    slot.grad = t.grad.raw_data();
    slot.state[0] = t.exp_avg.raw_data();
    slot.state[1] = t.exp_avg_sq.raw_data();
    slot.state[2] = u.amsgrad ? data_or_null(t.max_exp_avg_sq) : nullptr;
    slot.numel = t.param.numel();
    slots.push_back(slot);
  }
  OnDevice on(list[0].param);
  launch_adam_update_many(slots.data(), static_cast<int>(slots.size()), list[0].param.dtype(), u,
                          on.stream);
}

void CudaBackend::non_finite_check_and_unscale(const std::vector<Tensor>& grads,
                                               const Tensor& found_inf, double inv_scale) {
  if (grads.empty()) return;
  std::vector<ListSlot> slots;
  for (const Tensor& g : grads) {
    ListSlot slot;
    slot.param = g.raw_data();
    slot.numel = g.numel();
    slots.push_back(slot);
  }
  OnDevice on(found_inf);
  launch_non_finite_check_and_unscale(slots.data(), static_cast<int>(slots.size()),
                                      grads[0].dtype(), inv_scale,
                                      static_cast<float*>(found_inf.raw_data()), on.stream);
}

// ---------------------------------------------------------------------------- random

void CudaBackend::uniform(const Tensor& out, double low, double high, uint64_t seed,
                          uint64_t offset) {
  OnDevice on(out);
  launch_uniform(out.numel() ? out.raw_data() : nullptr, out.dtype(), out.numel(), low, high,
                 seed, offset, on.stream);
}

void CudaBackend::normal(const Tensor& out, double mean, double std, uint64_t seed,
                         uint64_t offset) {
  OnDevice on(out);
  launch_normal(out.numel() ? out.raw_data() : nullptr, out.dtype(), out.numel(), mean, std,
                seed, offset, on.stream);
}

// ---------------------------------------------------------------------------- registration

namespace {

// Runs at load time; touches no CUDA API, so a CUDA build starts fine on a machine without a
// GPU and only fails (with the runtime's reason) when a CUDA tensor is made.
const bool registered = [] {
  static CudaBackend backend;
  set_allocator(DeviceType::kCUDA, caching_allocator());
  set_pinned_allocator(pinned_allocator());
  register_backend(DeviceType::kCUDA, &backend);
  return true;
}();

}  // namespace

}  // namespace cuda
}  // namespace tessera
