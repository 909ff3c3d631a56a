// Differentiable transformer layers: layer norm, GELU and embedding, each one fused op forward
// and one backward (tensor/ops_transformer.cc computes both).
//
// Embedding and weight tying: a GPT's token embedding is also its output projection, the same
// Variable read by embedding() and by a matmul with its transpose. Nothing here is special for
// that: each op returns its own gradient of the weight and the engine adds the two into the
// one .grad, as it does for any Variable used twice.
#include "autograd/autocast.h"
#include "autograd/custom_op.h"
#include "autograd/functions.h"
#include "autograd/functions_util.h"

namespace tessera {

Variable layer_norm(const Variable& input_in, const Variable& weight_in, const Variable& bias_in,
                    double eps) {
  // Autocast runs it in f32 (the table in autocast.cc), as PyTorch does: its sums over a row
  // lose too much in f16/bf16.
  const auto in = autocast_args("layer_norm", input_in, weight_in, bias_in);
  const Variable &input = in[0], &weight = in[1], &bias = in[2];
  const Tensor w_data = weight.defined() ? weight.data() : Tensor();
  LayerNormResult r =
      layer_norm(input.data(), w_data, bias.defined() ? bias.data() : Tensor(), eps);
  const bool need_x = input.requires_grad();
  const bool need_w = weight.defined() && weight.requires_grad();
  const bool need_b = bias.defined() && bias.requires_grad();
  const DType w_dtype = weight.defined() ? weight.dtype() : input.dtype();
  const DType b_dtype = bias.defined() ? bias.dtype() : input.dtype();
  const Tensor x = input.data();
  const Variable w = weight;  // read at backward time (ZeRO-3 re-gathers it)
  return record("LayerNormBackward", r.output, {input, weight, bias},
                [=, mean = r.mean, rstd = r.rstd](const Tensor& g) -> Grads {
                  LayerNormGrads grads =
                      layer_norm_backward(g, x, w.defined() ? w.data() : Tensor(), mean, rstd,
                                          need_x, need_w, need_b);
                  return {grads.input, need_w ? grads.weight.to(w_dtype) : Tensor(),
                          need_b ? grads.bias.to(b_dtype) : Tensor()};
                });
}

Variable gelu(const Variable& input, GeluApproximate approximate) {
  const Tensor x = input.data();
  return record("GeluBackward", gelu(x, approximate), {input},
                [x, approximate](const Tensor& g) -> Grads {
                  return {gelu_backward(g, x, approximate)};
                });
}

Variable embedding(const Variable& weight, const Tensor& indices) {
  TS_CHECK(weight.defined(), "embedding: weight is an undefined Variable");
  const int64_t num_weights = weight.dim() >= 1 ? weight.size(0) : 0;
  const DType w_dtype = weight.dtype();
  // Backward needs only the indices and the weight's shape: not its data, so a weight that
  // ZeRO-3 released after the forward is not gathered again for it.
  return record("EmbeddingBackward", embedding(weight.data(), indices), {weight},
                [indices, num_weights, w_dtype](const Tensor& g) -> Grads {
                  return {embedding_backward(g, indices, num_weights, w_dtype)};
                });
}

}  // namespace tessera
