// Tensor ops: free functions on Tensors, without autograd (autograd/ builds on these).
//
// Each op checks its arguments (errors name the op and the shapes/dtypes/devices involved),
// works out the result's shape and dtype (NumPy broadcasting, promote_types), allocates it and
// hands the computation to the Backend of the operands' device (tensor/backend.h). Results are
// fresh contiguous tensors unless the name ends in '_' (in place).
#pragma once

#include <utility>
#include <vector>

#include "tensor/attention_params.h"
#include "tensor/conv_params.h"
#include "tensor/random.h"
#include "tensor/tensor.h"

namespace tessera {

// ---- elementwise binary, with broadcasting ----
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double b);
Tensor sub(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);
Tensor div(const Tensor& a, double b);
Tensor pow(const Tensor& a, double exponent);
Tensor maximum(const Tensor& a, double b);
Tensor minimum(const Tensor& a, double b);

// Comparisons give bool tensors.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, double b);
Tensor ne(const Tensor& a, double b);
Tensor lt(const Tensor& a, double b);
Tensor le(const Tensor& a, double b);
Tensor gt(const Tensor& a, double b);
Tensor ge(const Tensor& a, double b);

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);
Tensor operator-(const Tensor& a);

// In place: a op= b (b broadcast to a's shape, converted to a's dtype).
Tensor& add_(Tensor& a, const Tensor& b, double alpha = 1.0);  // a += alpha * b
Tensor& mul_(Tensor& a, const Tensor& b);
Tensor& mul_(Tensor& a, double b);

// ---- elementwise unary ----
Tensor neg(const Tensor& a);
Tensor abs(const Tensor& a);
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
Tensor sqrt(const Tensor& a);
Tensor rsqrt(const Tensor& a);
Tensor tanh(const Tensor& a);
Tensor sigmoid(const Tensor& a);
Tensor relu(const Tensor& a);
Tensor sign(const Tensor& a);
Tensor square(const Tensor& a);
Tensor reciprocal(const Tensor& a);
Tensor clamp(const Tensor& a, double low, double high);
// Backward helpers: the gradient of relu/sigmoid/tanh given grad_out and the saved value.
Tensor relu_backward(const Tensor& grad, const Tensor& input);
Tensor sigmoid_backward(const Tensor& grad, const Tensor& output);
Tensor tanh_backward(const Tensor& grad, const Tensor& output);
// cond ? a : b, all three broadcast together; cond is bool.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);

// ---- reductions; an empty `dims` means every dim ----
Tensor sum(const Tensor& a, const Shape& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& a, const Shape& dims = {}, bool keepdim = false);
Tensor amax(const Tensor& a, const Shape& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& a, const Shape& dims = {}, bool keepdim = false);
// Variance with Bessel's correction by default (correction = 1), as torch.var.
Tensor var(const Tensor& a, const Shape& dims = {}, int64_t correction = 1, bool keepdim = false);
// Max/min along one dim: values and (i64) indices of the first extreme element.
std::pair<Tensor, Tensor> max(const Tensor& a, int64_t dim, bool keepdim = false);
std::pair<Tensor, Tensor> min(const Tensor& a, int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& a, int64_t dim, bool keepdim = false);
Tensor argmin(const Tensor& a, int64_t dim, bool keepdim = false);
// Sums `a` down to `shape` (the inverse of broadcasting `shape` up to a's shape).
Tensor sum_to(const Tensor& a, const Shape& shape);

// ---- linear algebra ----
// 1-D/2-D/batched like torch.matmul (batch dims broadcast). Transposed views are handed to the
// GEMM as transposed operands, not copied.
Tensor matmul(const Tensor& a, const Tensor& b);

// ---- softmax over one dim ----
Tensor softmax(const Tensor& a, int64_t dim);
Tensor log_softmax(const Tensor& a, int64_t dim);
Tensor softmax_backward(const Tensor& grad_out, const Tensor& out, int64_t dim);
Tensor log_softmax_backward(const Tensor& grad_out, const Tensor& out, int64_t dim);

// ---- causal multi-head self-attention (tensor/ops_attention.cc) ----
// q, k, v [B, H, T, D], one floating dtype and device: output [B, H, T, D] =
// softmax(mask(scale q k^T)) v, query t attending to keys s <= t. FlashAttention's algorithm:
// computed by blocks of queries and keys with an online softmax, so the [B, H, T, T] scores are
// never stored and memory grows linearly in T. logsumexp [B, H, T] (f32; f64 for f64 inputs)
// is log sum_s exp(scale q_t.k_s) per query row: with the output, all backward needs to
// recompute the probabilities. f16/bf16 inputs are computed in f32, the output in their dtype.
struct CausalAttentionResult {
  Tensor output;
  Tensor logsumexp;
};
CausalAttentionResult causal_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                       double scale, const AttentionBlocks& blocks = {});
struct CausalAttentionGrads {
  Tensor q, k, v;
};
CausalAttentionGrads causal_attention_backward(const Tensor& grad_out, const Tensor& q,
                                               const Tensor& k, const Tensor& v,
                                               const Tensor& output, const Tensor& logsumexp,
                                               double scale, const AttentionBlocks& blocks = {});
// One block of keys of a longer causal attention, by absolute positions (ring attention's
// step, dist/context_parallel/): q [B, H, Tq, D] at q_positions, k and v [B, H, Tk, D] at
// k_positions (AttentionPositions' runs, Tq and Tk rows), query p seeing key s when s <= p.
// The result is softmax over this block's keys alone, with its row logsumexp; a row that sees
// none of them gets output 0 and logsumexp -inf. The output stays in the kernels' dtype (f32;
// f64 for f64 inputs) so that combining blocks loses nothing. causal_attention(q, k, v) is
// the case of one block at positions 0..T-1 for both.
CausalAttentionResult causal_attention_block(const Tensor& q, const Tensor& k, const Tensor& v,
                                             double scale, const AttentionPositions& q_positions,
                                             const AttentionPositions& k_positions,
                                             const AttentionBlocks& blocks = {});
// The exact softmax over the union of two blocks' keys from their partial results (the online
// softmax's rescaling): L = log(e^La + e^Lb), O = e^(La - L) Oa + e^(Lb - L) Ob; a side with
// L = -inf weighs 0, and both at -inf give O = 0, L = -inf.
CausalAttentionResult combine_attention(const CausalAttentionResult& a,
                                        const CausalAttentionResult& b);
// The gradients through one block: `output` and `logsumexp` are those of the whole attention
// (combined over every block), which is all FlashAttention's backward needs (D = rowsum(dO O)
// and P = exp(s q.k - L)). Gives this block's part of grad q (sum over the blocks for the
// whole) and the block's grad k and grad v, in the inputs' dtypes.
CausalAttentionGrads causal_attention_block_backward(
    const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
    const Tensor& output, const Tensor& logsumexp, double scale,
    const AttentionPositions& q_positions, const AttentionPositions& k_positions,
    const AttentionBlocks& blocks = {});

// ---- convolution and pooling (NCHW) ----
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias,
              const Conv2dParams& params);
Tensor conv2d_backward_input(const Tensor& grad_out, const Tensor& weight,
                             const Shape& input_shape, const Conv2dParams& params);
Tensor conv2d_backward_weight(const Tensor& grad_out, const Tensor& input,
                              const Shape& weight_shape, const Conv2dParams& params);
// Both backward passes from one call: {input gradient, weight gradient}, each computed only
// when asked for (`input` may be undefined when the weight gradient is not). The same values as
// the two calls above; the backend may prepare grad_out (widen it, reorder it) once for both.
std::pair<Tensor, Tensor> conv2d_backward(const Tensor& grad_out, const Tensor& input,
                                          const Tensor& weight, const Shape& input_shape,
                                          const Conv2dParams& params, bool need_input,
                                          bool need_weight);
// Values and the flat (h * W + w) index of each window's maximum within its plane.
std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, const Pool2dParams& p);
Tensor max_pool2d_backward(const Tensor& grad_out, const Tensor& indices,
                           const Shape& input_shape);
Tensor avg_pool2d(const Tensor& input, const Pool2dParams& p);
Tensor avg_pool2d_backward(const Tensor& grad_out, const Shape& input_shape,
                           const Pool2dParams& p);
Tensor adaptive_avg_pool2d(const Tensor& input, std::array<int64_t, 2> output_size);
Tensor adaptive_avg_pool2d_backward(const Tensor& grad_out, const Shape& input_shape);

// ---- fused cross-entropy over the rows of [N, C] logits (class-index targets) ----
// With q_i = (1 - eps) one_hot(y_i) + eps / C: loss_i = -sum_c q_ic log softmax(x_i)_c. One
// pass per row computes the log-probabilities (kept for the backward) and the loss.
struct CrossEntropyRows {
  Tensor loss;       // [N], logits' dtype
  Tensor log_probs;  // [N, C]
};
CrossEntropyRows cross_entropy_rows(const Tensor& logits, const Tensor& target,
                                    double label_smoothing = 0);
// d loss_i / d logits_i = softmax(x_i) - q_i, times row_grad ([N], or [1] for every row).
Tensor cross_entropy_rows_backward(const Tensor& log_probs, const Tensor& target,
                                   const Tensor& row_grad, double label_smoothing = 0);

// ---- batch norm over dim 1 of [N, C, ...] ----
struct BatchNormResult {
  Tensor output;
  Tensor mean;    // [C], the statistics used (batch's in training, running in eval)
  Tensor invstd;  // [C], 1 / sqrt(var + eps)
};
// Training uses batch statistics and updates running_mean/running_var in place (unbiased
// variance, momentum as PyTorch: running = (1 - m) running + m batch); eval uses them.
BatchNormResult batch_norm(const Tensor& input, const Tensor& weight, const Tensor& bias,
                           const Tensor& running_mean, const Tensor& running_var, bool training,
                           double momentum, double eps);
struct BatchNormGrads {
  Tensor input, weight, bias;
};
BatchNormGrads batch_norm_backward(const Tensor& grad_out, const Tensor& input,
                                   const Tensor& weight, const Tensor& mean,
                                   const Tensor& invstd, bool training, bool need_input,
                                   bool need_weight);
// The tail of a residual block as one op: output = relu(batch_norm(input) + residual), with
// residual undefined (then relu(batch_norm(input))) or of input's shape, dtype and device.
// Statistics, running-statistic updates and eval mode are batch_norm's; the normalization,
// the addition and the ReLU are one pass over the activation.
BatchNormResult batch_norm_relu(const Tensor& input, const Tensor& weight, const Tensor& bias,
                                const Tensor& residual, const Tensor& running_mean,
                                const Tensor& running_var, bool training, double momentum,
                                double eps);
struct BatchNormReluGrads {
  Tensor input, weight, bias, residual;
};
// Its backward from the saved output (the ReLU's mask is output > 0). The residual's gradient
// is the masked gradient grad_out * (output > 0).
BatchNormReluGrads batch_norm_relu_backward(const Tensor& grad_out, const Tensor& output,
                                            const Tensor& input, const Tensor& weight,
                                            const Tensor& mean, const Tensor& invstd,
                                            bool training, bool need_input, bool need_weight,
                                            bool need_residual);

// ---- transformer layers: layer norm, GELU, embedding (ops_transformer.cc) ----
// Layer norm over the last dim (PyTorch's F.layer_norm with normalized_shape = [n]): each row
// x of n values becomes (x - mean(x)) / sqrt(var(x) + eps) * weight + bias, var biased.
// weight and bias are [n] or undefined (then 1 and 0); the output has the input's dtype, the
// statistics are kept in f32 (f64 for f64 input) for the backward.
struct LayerNormResult {
  Tensor output;
  Tensor mean;  // [rows] (rows = numel / n)
  Tensor rstd;  // [rows], 1 / sqrt(var + eps)
};
LayerNormResult layer_norm(const Tensor& input, const Tensor& weight, const Tensor& bias,
                           double eps = 1e-5);
struct LayerNormGrads {
  Tensor input;         // the input's dtype
  Tensor weight, bias;  // [n] in the compute type (f32, or f64 for f64 input)
  // (each undefined unless asked for)
};
LayerNormGrads layer_norm_backward(const Tensor& grad_out, const Tensor& input,
                                   const Tensor& weight, const Tensor& mean, const Tensor& rstd,
                                   bool need_input, bool need_weight, bool need_bias);
// GELU: x * Phi(x) (kNone, PyTorch's default), or GPT-2's tanh approximation (kTanh),
//   0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
Tensor gelu(const Tensor& input, GeluApproximate approximate = GeluApproximate::kNone);
// grad_out * gelu'(input).
Tensor gelu_backward(const Tensor& grad_out, const Tensor& input,
                     GeluApproximate approximate = GeluApproximate::kNone);
// Rows of weight [V, C] picked by i64 indices of any shape: [..., C]. Every index must be in
// [0, V); the error names the first one that is not.
Tensor embedding(const Tensor& weight, const Tensor& indices);
// The weight's gradient [V, C] (in weight_dtype): zero but for the rows the indices name,
// where the rows of grad_out [..., C] are added (a repeated index sums its rows).
Tensor embedding_backward(const Tensor& grad_out, const Tensor& indices, int64_t num_weights,
                          DType weight_dtype);
// The same gradient added into `grad_weight` [V, C] in place, touching only the indexed rows (no
// [V, C] zero-filled, no pass over the other rows): grad_weight[indices[i]] += grad_out[i].
// grad_weight must be contiguous, on grad_out's device and in its compute type (f32 for f32, f16
// and bf16 gradients, f64 for f64), which embedding_rows_addable says.
bool embedding_rows_addable(const Tensor& grad_weight, const Tensor& grad_out);
void embedding_backward_add_(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& indices);

// ---- joining, splitting, indexing ----
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim);
// Views of consecutive pieces of `split_size` along dim (the last may be smaller).
std::vector<Tensor> split(const Tensor& a, int64_t split_size, int64_t dim);
std::vector<Tensor> split(const Tensor& a, const std::vector<int64_t>& sizes, int64_t dim);
std::vector<Tensor> chunk(const Tensor& a, int64_t chunks, int64_t dim);
Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index);
// out[i][j] = a[i][index[i][j]] (dim = 1), as torch.gather.
Tensor gather(const Tensor& a, int64_t dim, const Tensor& index);
// A copy of `a` with src added at the positions `index` names along dim, as torch.scatter_add.
Tensor scatter_add(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& src);
// [N] class indices -> [N, classes] of 0/1 in `dtype`.
Tensor one_hot(const Tensor& labels, int64_t classes, DType dtype = kF32);

// ---- random (seeded; default_generator() unless one is given) ----
Tensor rand(const Shape& shape, const TensorOptions& options = {}, Generator* gen = nullptr);
Tensor uniform(const Shape& shape, double low, double high, const TensorOptions& options = {},
               Generator* gen = nullptr);
Tensor randn(const Shape& shape, const TensorOptions& options = {}, Generator* gen = nullptr);
Tensor normal(const Shape& shape, double mean, double std, const TensorOptions& options = {},
              Generator* gen = nullptr);
// 1 with probability p, else 0, in options' dtype.
Tensor bernoulli(const Shape& shape, double p, const TensorOptions& options = {},
                 Generator* gen = nullptr);
Tensor& uniform_(Tensor& t, double low, double high, Generator* gen = nullptr);
Tensor& normal_(Tensor& t, double mean, double std, Generator* gen = nullptr);

// ---- checks for tests ----
// |a - b| <= atol + rtol |b| elementwise, shapes equal (NaNs never match).
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8);
// The largest |a - b| (in f64).
double max_abs_diff(const Tensor& a, const Tensor& b);

}  // namespace tessera
