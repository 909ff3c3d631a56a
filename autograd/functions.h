// Differentiable ops on Variables. Each computes with the Tensor op of the same name
// (tensor/ops.h) and records its backward (autograd/custom_op.h) when a gradient is needed.
#pragma once

#include <array>
#include <vector>

#include "autograd/variable.h"
#include "tensor/attention_params.h"
#include "tensor/conv_params.h"
#include "tensor/random.h"

namespace tessera {

// ---- elementwise (broadcasting; gradients are summed back to each input's shape) ----
Variable add(const Variable& a, const Variable& b);
Variable sub(const Variable& a, const Variable& b);
Variable mul(const Variable& a, const Variable& b);
Variable div(const Variable& a, const Variable& b);
Variable maximum(const Variable& a, const Variable& b);
Variable minimum(const Variable& a, const Variable& b);
Variable add(const Variable& a, double b);
Variable mul(const Variable& a, double b);
Variable pow(const Variable& a, double exponent);
Variable operator+(const Variable& a, const Variable& b);
Variable operator-(const Variable& a, const Variable& b);
Variable operator*(const Variable& a, const Variable& b);
Variable operator/(const Variable& a, const Variable& b);
Variable operator+(const Variable& a, double b);
Variable operator-(const Variable& a, double b);
Variable operator*(const Variable& a, double b);
Variable operator/(const Variable& a, double b);
Variable operator+(double a, const Variable& b);
Variable operator-(double a, const Variable& b);
Variable operator*(double a, const Variable& b);
Variable operator/(double a, const Variable& b);
Variable operator-(const Variable& a);

Variable neg(const Variable& a);
Variable abs(const Variable& a);
Variable exp(const Variable& a);
Variable log(const Variable& a);
Variable sqrt(const Variable& a);
Variable square(const Variable& a);
Variable tanh(const Variable& a);
Variable sigmoid(const Variable& a);
Variable relu(const Variable& a);
Variable clamp(const Variable& a, double low, double high);
// cond (a bool Tensor) ? a : b.
Variable where(const Tensor& cond, const Variable& a, const Variable& b);

// ---- reductions (empty dims: all) ----
Variable sum(const Variable& a, const Shape& dims = {}, bool keepdim = false);
Variable mean(const Variable& a, const Shape& dims = {}, bool keepdim = false);
Variable var(const Variable& a, const Shape& dims = {}, int64_t correction = 1,
             bool keepdim = false);
// Gradient shared equally among tied maxima, as torch.amax.
Variable amax(const Variable& a, const Shape& dims = {}, bool keepdim = false);
Variable amin(const Variable& a, const Shape& dims = {}, bool keepdim = false);

// ---- shape and views (gradients flow back through the view) ----
Variable reshape(const Variable& a, const Shape& shape);
Variable view(const Variable& a, const Shape& shape);
Variable flatten(const Variable& a, int64_t start_dim = 0, int64_t end_dim = -1);
Variable transpose(const Variable& a, int64_t dim0, int64_t dim1);
Variable permute(const Variable& a, const Shape& dims);
Variable narrow(const Variable& a, int64_t dim, int64_t start, int64_t length);
Variable slice(const Variable& a, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
Variable select(const Variable& a, int64_t dim, int64_t index);
Variable expand(const Variable& a, const Shape& shape);
Variable squeeze(const Variable& a, int64_t dim);
Variable unsqueeze(const Variable& a, int64_t dim);
Variable contiguous(const Variable& a);
// The same values laid out in `format` (tensor.h's MemoryFormat; PyTorch's
// x.contiguous(memory_format=...)); the gradient passes through in whatever layout it has.
Variable contiguous(const Variable& a, MemoryFormat format);
Variable to(const Variable& a, DType dtype);
Variable to(const Variable& a, Device device);
Variable cat(const std::vector<Variable>& parts, int64_t dim);
Variable stack(const std::vector<Variable>& parts, int64_t dim);
std::vector<Variable> split(const Variable& a, int64_t split_size, int64_t dim);
std::vector<Variable> chunk(const Variable& a, int64_t chunks, int64_t dim);
Variable index_select(const Variable& a, int64_t dim, const Tensor& index);
Variable gather(const Variable& a, int64_t dim, const Tensor& index);

// ---- linear algebra ----
Variable matmul(const Variable& a, const Variable& b);
// x [..., in] W^T [in, out] + b [out]. bias may be undefined.
Variable linear(const Variable& x, const Variable& weight, const Variable& bias);

// ---- causal multi-head self-attention (autograd/functions_attention.cc) ----
// q, k, v [B, H, T, D]: softmax(mask(scale q k^T)) v, query t attending to keys s <= t
// (tensor/ops.h's causal_attention: FlashAttention's blocks, memory linear in T). Without a
// scale, 1 / sqrt(D). Autocast runs it in lower precision, as PyTorch's
// scaled_dot_product_attention (the kernels compute in f32 inside).
Variable causal_attention(const Variable& q, const Variable& k, const Variable& v, double scale,
                          const AttentionBlocks& blocks = {});
Variable causal_attention(const Variable& q, const Variable& k, const Variable& v);
// By absolute positions (tensor/ops.h's causal_attention_block): q [B, H, Tq, D] at
// q_positions attends to k, v [B, H, Tk, D] at k_positions, query p seeing key s when s <= p;
// a row that sees none of the keys gives 0 (and passes no gradient).
Variable causal_attention(const Variable& q, const Variable& k, const Variable& v, double scale,
                          const AttentionPositions& q_positions,
                          const AttentionPositions& k_positions,
                          const AttentionBlocks& blocks = {});
// GPT-2's attention between its two Linears: qkv [B, T, 3C] (q | k | v along the last dim,
// n_head heads of C / n_head each) -> [B, T, C], the heads' outputs side by side, scale
// 1 / sqrt(C / n_head). The head split and merge are part of the op (and of its backward).
Variable causal_self_attention(const Variable& qkv, int64_t n_head,
                               const AttentionBlocks& blocks = {});

// ---- neural-network ops ----
Variable conv2d(const Variable& input, const Variable& weight, const Variable& bias,
                const Conv2dParams& params = {});
Variable max_pool2d(const Variable& input, const Pool2dParams& params);
Variable avg_pool2d(const Variable& input, const Pool2dParams& params);
Variable adaptive_avg_pool2d(const Variable& input, std::array<int64_t, 2> output_size);
Variable softmax(const Variable& a, int64_t dim);
Variable log_softmax(const Variable& a, int64_t dim);
// Training: normalizes with batch statistics and updates running_mean/running_var (plain
// Tensors, in place); eval: uses them. weight/bias may be undefined.
Variable batch_norm(const Variable& input, const Variable& weight, const Variable& bias,
                    const Tensor& running_mean, const Tensor& running_var, bool training,
                    double momentum = 0.1, double eps = 1e-5);
// relu(batch_norm(input) + residual) as one op, the tail of a residual block: one pass over
// the activation forward, and batch norm's two passes backward with the ReLU's mask inside
// (tensor/ops.h). residual may be undefined (relu(batch_norm(input))); one of another dtype
// than the input falls back to the unfused ops, whose add promotes. Autocast treats it as
// batch_norm (f32 statistics, the input's dtype kept).
Variable batch_norm_relu(const Variable& input, const Variable& weight, const Variable& bias,
                         const Variable& residual, const Tensor& running_mean,
                         const Tensor& running_var, bool training, double momentum = 0.1,
                         double eps = 1e-5);
// Zeroes each element with probability p and scales the rest by 1/(1-p) (training only).
Variable dropout(const Variable& a, double p, bool training, Generator* gen = nullptr);

// ---- transformer layers (functions_transformer.cc) ----
// Layer norm over the last dim, PyTorch's F.layer_norm(x, [n], weight, bias, eps): fused
// forward and backward. weight and bias are [n] or undefined. Autocast runs it in f32.
Variable layer_norm(const Variable& input, const Variable& weight, const Variable& bias,
                    double eps = 1e-5);
// GELU; GeluApproximate::kTanh is GPT-2's form (tensor/ops.h has both formulas).
Variable gelu(const Variable& input, GeluApproximate approximate = GeluApproximate::kNone);
// Rows of weight [V, C] at i64 indices [...]: [..., C]. The weight's gradient adds the output
// gradient's rows into the indexed rows only (a repeated index sums); tied to an output
// projection, the two uses' gradients add up in the weight's .grad.
Variable embedding(const Variable& weight, const Tensor& indices);

// ---- losses ----
enum class Reduction { kMean, kSum, kNone };
// Fused log-softmax + NLL on logits [N, C] and class indices [N] (i64), with optional label
// smoothing eps: the target distribution is (1 - eps) one_hot + eps / C.
Variable cross_entropy(const Variable& logits, const Tensor& target,
                       Reduction reduction = Reduction::kMean, double label_smoothing = 0.0);
// Negative log-likelihood of log-probabilities [N, C] at class indices [N].
Variable nll_loss(const Variable& log_probs, const Tensor& target,
                  Reduction reduction = Reduction::kMean);
Variable mse_loss(const Variable& input, const Variable& target,
                  Reduction reduction = Reduction::kMean);

}  // namespace tessera
