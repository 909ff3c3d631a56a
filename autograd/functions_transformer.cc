// Differentiable transformer layers: layer norm, GELU and embedding, each one fused op forward
// and one backward (tensor/ops_transformer.cc computes both).
//
// Embedding and weight tying: a GPT's token embedding is also its output projection, the same
// Variable read by embedding() and by a matmul with its transpose. Nothing here is special for
// that: each op returns its own gradient of the weight and the engine adds the two into the
// one .grad, as it does for any Variable used twice. The embedding's comes as rows (the tokens'
// rows of the output gradient, RowsGradient in node.h), which the engine adds in place into the
// matmul's dense [V, C] gradient: no second [V, C] tensor, zero-filled, then added.
#include <optional>
#include <utility>

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

namespace {

// The embedding's backward gives its weight gradient as rows (RowsGradient): the engine adds
// them into the weight's other gradients or its .grad, touching only the looked-up rows.
class EmbeddingBackward final : public Node {
 public:
  EmbeddingBackward(Tensor indices, int64_t num_weights, DType dtype)
      : indices_(std::move(indices)), num_weights_(num_weights), dtype_(dtype) {}
  std::string name() const override { return "EmbeddingBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    check_not_released();
    rows_ = RowsGradient{std::move(grads[0]), indices_, num_weights_, dtype_};
    return {Tensor()};
  }
  std::optional<RowsGradient> take_rows_gradient(size_t output) override {
    if (output != 0) return std::nullopt;
    return std::exchange(rows_, std::nullopt);
  }
  void release_saved() override {
    Node::release_saved();
    indices_ = Tensor();
  }

 private:
  Tensor indices_;
  int64_t num_weights_;
  DType dtype_;
  std::optional<RowsGradient> rows_;
};

}  // namespace

Variable embedding(const Variable& weight, const Tensor& indices) {
  TS_CHECK(weight.defined(), "embedding: weight is an undefined Variable");
  const int64_t num_weights = weight.dim() >= 1 ? weight.size(0) : 0;
  Tensor out = embedding(weight.data(), indices);
  if (!any_requires_grad({weight})) return Variable(std::move(out));
  // Backward needs only the indices and the weight's shape: not its data, so a weight that
  // ZeRO-3 released after the forward is not gathered again for it.
  return attach(std::move(out), std::make_shared<EmbeddingBackward>(indices, num_weights, weight.dtype()),
                {weight});
}

}  // namespace tessera
