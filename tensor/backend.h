// Backend: the kernels one device type provides.
//
// ops.cc is device-agnostic: it checks arguments, works out shapes, broadcasting and dtype
// promotion, allocates outputs, and then calls the Backend of the operands' device. A Backend
// only computes, on tensors whose shapes and dtypes ops.cc has already made consistent, so the
// CPU kernels (tensor/cpu) and the CUDA kernels (tensor/cuda) implement exactly this list and
// nothing else. The CPU backend is always linked; the CUDA one registers itself when built with
// --config=cuda.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensor/attention_params.h"
#include "tensor/conv_params.h"
#include "tensor/fused_updates.h"
#include "tensor/kinds.h"
#include "tensor/tensor.h"

namespace tessera {

class StreamBackend;  // tensor/stream.h

// Row-major C[b] = alpha * op(A[b]) * op(B[b]) + beta * C[b] for b in [0, batch).
struct GemmArgs {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  double alpha = 1, beta = 0;
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  int64_t lda = 0, ldb = 0, ldc = 0;
  int64_t batch = 1, stride_a = 0, stride_b = 0, stride_c = 0;
  DType dtype = kF32;
  Device device;
};

// The kernels a backend may run on channels-last (NHWC) tensors (Backend::channels_last), and
// on channels-blocked ones (Backend::channels_blocked).
enum class ChannelsLastKernel { kConv2d, kBatchNorm, kMaxPool2d };

class Backend {
 public:
  virtual ~Backend() = default;

  // The devices of this type the process can use; never throws (0 when there are none).
  virtual int device_count() { return 1; }
  // Why device_count() is 0, in words (for errors and test skips).
  virtual std::string unavailable_reason() { return ""; }
  // Waits for all work queued on device `index`.
  virtual void synchronize(int /*index*/) {}
  // Streams and events (tensor/stream.h); null for a device without them (the CPU).
  virtual StreamBackend* streams() { return nullptr; }
  // Whether this device multiplies f16 or bf16 operands natively (true), or widens them to f32
  // and computes what f32 does (saving memory but not time).
  virtual bool computes_natively(DType /*low_precision*/) { return true; }
  // Whether f32 3x3 convolutions may run Winograd's F(4x4, 3x3) here when allow_winograd()
  // (accelerator.h) says so: the CPU where oneDNN has it (AVX-512). A GPU's library picks its
  // own algorithms, so false.
  virtual bool winograd_available() { return false; }
  // Whether this backend's `kernel` takes and gives channels-last tensors of `dtype`
  // (tensor.h's MemoryFormat). When it does, ops.cc passes NHWC operands (all of one call in
  // the same layout) where the caller's tensors are NHWC or a convolution asks for it
  // (Conv2dParams::channels_last); otherwise every operand arrives contiguous NCHW, as the
  // comments below say. The default: no channels-last kernels.
  virtual bool channels_last(ChannelsLastKernel /*kernel*/, DType /*dtype*/) { return false; }
  // Whether `kernel` on `dtype` runs fastest on channels-last tensors, so that a convolution
  // gives NHWC output from NCHW input too: the layers after it keep that layout and the next
  // convolution reads it as it is, where otherwise every call would transpose its activations
  // in and out (the CPU's bf16 convolutions where oneDNN picks NHWC, with AMX). Only where
  // channels_last(kernel, dtype) is true. The default: no such preference.
  virtual bool prefers_channels_last(ChannelsLastKernel /*kernel*/, DType /*dtype*/) {
    return false;
  }
  // Whether `kernel` takes and gives channels-blocked tensors of `dtype` (tensor.h's
  // MemoryFormat::kChannelsBlocked, nChw16c). When it does, ops.cc passes them so (all of one
  // call's activations with a multiple of 16 channels) where the caller's tensors are, or a
  // convolution asks for it (Conv2dParams::channels_blocked); a kernel then reaches their
  // elements through channel_blocks(). The default: none, so every operand arrives NCHW.
  virtual bool channels_blocked(ChannelsLastKernel /*kernel*/, DType /*dtype*/) { return false; }

  // dst and src have the same shape; dtypes may differ (converted); either may be strided.
  // A Backend whose device is not the CPU also copies between its device and the CPU.
  virtual void copy(const Tensor& src, const Tensor& dst) = 0;
  virtual void fill(const Tensor& dst, double value) = 0;

  // Elementwise. `out` is contiguous; inputs have out's shape (broadcast by stride-0 views) and
  // one dtype, which out shares except for comparisons (bool).
  virtual void unary(UnaryOp op, const Tensor& in, const Tensor& out, double alpha,
                     double beta) = 0;
  virtual void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) = 0;
  virtual void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) = 0;

  // in: contiguous [outer, inner]; out: contiguous [outer]; reduces each row.
  // kArgmax/kArgmin write i64; kSum over integers writes i64; kVar uses `correction`.
  virtual void reduce(ReduceOp op, const Tensor& in, const Tensor& out, int64_t correction) = 0;

  virtual void gemm(const GemmArgs& args) = 0;

  // Over the last dim of contiguous [rows, n] tensors.
  virtual void softmax(const Tensor& in, const Tensor& out, bool log) = 0;
  virtual void softmax_backward(const Tensor& grad_out, const Tensor& out, const Tensor& grad_in,
                                bool log) = 0;

  // Fused cross-entropy on contiguous [N, C] rows; target contiguous i64 [N], in range.
  // Writes log_probs [N, C] and loss [N] in logits' dtype (tensor/ops.h has the formulas);
  // the backward's row_grad is [N] in that dtype.
  virtual void cross_entropy(const Tensor& logits, const Tensor& target, double label_smoothing,
                             const Tensor& log_probs, const Tensor& loss) = 0;
  virtual void cross_entropy_backward(const Tensor& log_probs, const Tensor& target,
                                      const Tensor& row_grad, double label_smoothing,
                                      const Tensor& grad_logits) = 0;

  // Causal multi-head attention by absolute positions (tensor/ops.h's causal_attention and
  // causal_attention_block), FlashAttention's way: q, out, grad_out, grad_q contiguous
  // [B, H, Tq, D], k, v, grad_k, grad_v contiguous [B, H, Tk, D], one dtype (f32 or f64);
  // q_positions [Tq] and k_positions [Tk] contiguous i64 on the same device: query row r sees
  // key row c when k_positions[c] <= q_positions[r]. logsumexp contiguous [B, H, Tq] in q's
  // dtype, the log of each query row's sum of exp(scaled scores) (-inf, with out = 0, for a row
  // that sees no key), all the backward needs to recompute the probabilities; the backward
  // takes the output and logsumexp of the whole attention (of which this key block may be a
  // part) and writes this block's share of grad_q and its grad_k, grad_v. `blocks` is the
  // CPU's tiling; a backend may choose its own.
  virtual void causal_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                const Tensor& q_positions, const Tensor& k_positions,
                                double scale, const AttentionBlocks& blocks, const Tensor& out,
                                const Tensor& logsumexp) = 0;
  virtual void causal_attention_backward(const Tensor& grad_out, const Tensor& q,
                                         const Tensor& k, const Tensor& v, const Tensor& out,
                                         const Tensor& logsumexp, const Tensor& q_positions,
                                         const Tensor& k_positions, double scale,
                                         const AttentionBlocks& blocks, const Tensor& grad_q,
                                         const Tensor& grad_k, const Tensor& grad_v) = 0;

  // NCHW, all contiguous; bias may be undefined. (Or, where channels_last(kConv2d) says so,
  // input/out/grad_out/grad_in all NHWC in memory, though one with a single channel or 1x1 maps
  // is contiguous NCHW as well; weights are always contiguous OIHW.)
  virtual void conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias,
                      const Conv2dParams& p, const Tensor& out) = 0;
  virtual void conv2d_backward_input(const Tensor& grad_out, const Tensor& weight,
                                     const Conv2dParams& p, const Tensor& grad_in) = 0;
  virtual void conv2d_backward_weight(const Tensor& grad_out, const Tensor& input,
                                      const Conv2dParams& p, const Tensor& grad_weight) = 0;
  // Both passes (either output may be undefined: not asked for; input is undefined when
  // grad_weight is). The default calls the two above; a backend overrides it to prepare
  // grad_out once for both.
  virtual void conv2d_backward(const Tensor& grad_out, const Tensor& input, const Tensor& weight,
                               const Conv2dParams& p, const Tensor& grad_in,
                               const Tensor& grad_weight);

  // Contiguous NCHW (or NHWC, with indices in the same layout, where channels_last says so);
  // indices hold h * W + w of each maximum in its input plane. max_pool2d_backward writes
  // every element of grad_in (zero where no window took it).
  virtual void max_pool2d(const Tensor& input, const Pool2dParams& p, const Tensor& out,
                          const Tensor& indices) = 0;
  virtual void max_pool2d_backward(const Tensor& grad_out, const Tensor& indices,
                                   const Tensor& grad_in) = 0;
  virtual void avg_pool2d(const Tensor& input, const Pool2dParams& p, const Tensor& out) = 0;
  virtual void avg_pool2d_backward(const Tensor& grad_out, const Pool2dParams& p,
                                   const Tensor& grad_in) = 0;
  virtual void adaptive_avg_pool2d(const Tensor& input, const Tensor& out) = 0;
  virtual void adaptive_avg_pool2d_backward(const Tensor& grad_out, const Tensor& grad_in) = 0;

  // Batch norm on contiguous [N, C, S] (S = H*W; or, where channels_last(kBatchNorm) says
  // so, every [N, C, S] operand of a call NHWC-ordered, strides [S*C, 1, C]); per-channel tensors are [C] in the compute
  // type (f32, or f64 for f64 inputs); weight/bias may be undefined (affine = false).
  virtual void batch_norm_stats(const Tensor& x, const Tensor& mean, const Tensor& var) = 0;
  virtual void batch_norm_apply(const Tensor& x, const Tensor& mean, const Tensor& invstd,
                                const Tensor& weight, const Tensor& bias, const Tensor& out) = 0;
  // grad_in (if defined) uses batch statistics when `training`, else treats mean/invstd as
  // constants. grad_weight/grad_bias may be undefined.
  virtual void batch_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& mean,
                                   const Tensor& invstd, const Tensor& weight, bool training,
                                   const Tensor& grad_in, const Tensor& grad_weight,
                                   const Tensor& grad_bias) = 0;
  // The memory-bound tail of a residual block in one pass over the activation:
  //   out = max(0, (x - mean) * invstd * weight + bias [+ residual])
  // residual is undefined or contiguous [N, C, S] in x's dtype. The default composes
  // batch_norm_apply, binary and unary (three passes); a backend overrides it to fuse them.
  virtual void batch_norm_apply_relu(const Tensor& x, const Tensor& mean, const Tensor& invstd,
                                     const Tensor& weight, const Tensor& bias,
                                     const Tensor& residual, const Tensor& out);
  // Its backward from the saved output: the ReLU's mask is out > 0, so the masked gradient
  // gm = grad_out * (out > 0) feeds batch_norm_backward, and is the residual's gradient
  // (written to grad_residual if defined). The default writes gm to a tensor of its own and
  // calls batch_norm_backward; a backend overrides it to mask inside that backward's passes.
  virtual void batch_norm_relu_backward(const Tensor& grad_out, const Tensor& out,
                                        const Tensor& x, const Tensor& mean,
                                        const Tensor& invstd, const Tensor& weight,
                                        bool training, const Tensor& grad_in,
                                        const Tensor& grad_weight, const Tensor& grad_bias,
                                        const Tensor& grad_residual);

  // Transformer layers (tensor/ops_transformer.cc). All tensors contiguous; x, out, grad_out
  // and grad_in share one dtype; per-row and per-feature tensors are in the compute type (f32,
  // or f64 for f64 inputs).
  // Layer norm over each row of x [rows, n]: writes out [rows, n], mean [rows] and
  // rstd [rows] = 1 / sqrt(biased variance + eps). weight and bias are always [n] (ones and
  // zeros stand in for an absent one).
  virtual void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                          const Tensor& out, const Tensor& mean, const Tensor& rstd) = 0;
  // Its backward in one pass over the rows: grad_in [rows, n], grad_weight and grad_bias [n]
  // (sums over the rows); each may be undefined (not asked for).
  virtual void layer_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& mean,
                                   const Tensor& rstd, const Tensor& weight,
                                   const Tensor& grad_in, const Tensor& grad_weight,
                                   const Tensor& grad_bias) = 0;
  // GELU elementwise (in, out, grad_out, grad_in of one shape), and its derivative times
  // grad_out.
  virtual void gelu(const Tensor& in, const Tensor& out, GeluApproximate approximate) = 0;
  virtual void gelu_backward(const Tensor& grad_out, const Tensor& in, const Tensor& grad_in,
                             GeluApproximate approximate) = 0;
  // The embedding's weight gradient: grad_weight[index[i]] += grad_out[i] for grad_out [N, C],
  // index i64 [N] (in range) and grad_weight [V, C] in the compute type. Only the indexed rows
  // are touched; a repeated index adds up, in index order on every thread count.
  virtual void embedding_backward(const Tensor& grad_out, const Tensor& index,
                                  const Tensor& grad_weight) = 0;

  // Indexing; index tensors are contiguous i64, checked in range by ops.cc.
  virtual void index_select(const Tensor& in, int64_t dim, const Tensor& index,
                            const Tensor& out) = 0;
  virtual void gather(const Tensor& in, int64_t dim, const Tensor& index, const Tensor& out) = 0;
  // self[..., index[i], ...] += src[..., i, ...] along dim (self contiguous).
  virtual void scatter_add(const Tensor& self, int64_t dim, const Tensor& index,
                           const Tensor& src) = 0;

  // Fused optimizer updates (tensor/fused_updates.h); all tensors contiguous, one dtype.
  virtual void sgd_update(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
                          const SgdUpdate& u) = 0;
  virtual void adam_update(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                           const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq,
                           const AdamUpdate& u) = 0;
  // Many parameters of one dtype at once; by default one update after the other.
  virtual void sgd_update_many(const std::vector<SgdTensors>& list, const SgdUpdate& u) {
    for (const SgdTensors& t : list) sgd_update(t.param, t.grad, t.momentum_buffer, u);
  }
  virtual void adam_update_many(const std::vector<AdamTensors>& list, const AdamUpdate& u) {
    for (const AdamTensors& t : list) {
      adam_update(t.param, t.grad, t.exp_avg, t.exp_avg_sq, t.max_exp_avg_sq, u);
    }
  }

  // Dynamic loss scaling (tensor/unscale.h): grads *= inv_scale in place, and found_inf (one f32
  // element on the grads' device) set to 1 if any element is inf or NaN. All grads contiguous
  // and of one floating dtype.
  virtual void non_finite_check_and_unscale(const std::vector<Tensor>& grads,
                                            const Tensor& found_inf, double inv_scale) = 0;

  // Counter-based random numbers: element i depends only on (seed, offset, i), never on the
  // thread count, so runs are bitwise reproducible. `out` is contiguous floating.
  virtual void uniform(const Tensor& out, double low, double high, uint64_t seed,
                       uint64_t offset) = 0;
  virtual void normal(const Tensor& out, double mean, double std, uint64_t seed,
                      uint64_t offset) = 0;
};

Backend& backend(DeviceType type);
inline Backend& backend(Device device) { return backend(device.type()); }
void register_backend(DeviceType type, Backend* backend);
bool backend_registered(DeviceType type);

}  // namespace tessera
