// LayerNorm (Ba, Kiros and Hinton): normalizes each vector of the last dim to zero mean and unit
// variance, then scales and shifts it by a learned weight (ones at first) and bias (zeros), as
// PyTorch's nn.LayerNorm(normalized_size). Unlike BatchNorm it keeps no statistics across
// batches: each token is normalized by its own, the same in training and eval, which is why a
// transformer (pre-LayerNorm GPT-2 blocks) can use it at any batch size and sequence length.
//
// The op is one fused pass forward and one backward (autograd's layer_norm), in f32 under
// autocast. Its parameters follow the model's dtype under model->to(kBF16) (the kernels compute
// in f32 either way), so a GPT's parameters stay one dtype, as ZeRO-3's flat parameter needs.
#pragma once

#include "nn/module.h"

namespace tessera {
namespace nn {

class LayerNormOptions {
 public:
  explicit LayerNormOptions(int64_t normalized_size) : normalized_size_(normalized_size) {}
  LayerNormOptions& eps(double e) { eps_ = e; return *this; }
  // false: no weight and no bias (PyTorch's elementwise_affine=False).
  LayerNormOptions& elementwise_affine(bool a) { elementwise_affine_ = a; return *this; }
  // false: a weight but no bias (PyTorch's bias=False).
  LayerNormOptions& bias(bool b) { bias_ = b; return *this; }

  int64_t normalized_size() const { return normalized_size_; }
  double eps() const { return eps_; }
  bool elementwise_affine() const { return elementwise_affine_; }
  bool bias() const { return bias_; }

 private:
  int64_t normalized_size_;
  double eps_ = 1e-5;
  bool elementwise_affine_ = true, bias_ = true;
};

class LayerNorm : public Module {
 public:
  explicit LayerNorm(const LayerNormOptions& options);
  explicit LayerNorm(int64_t normalized_size) : LayerNorm(LayerNormOptions(normalized_size)) {}
  std::string type_name() const override { return "LayerNorm"; }
  std::string extra_repr() const override;
  // x [..., normalized_size] -> the same shape.
  Variable forward(const Variable& x) override;
  // Weight to ones, bias to zeros, as at construction.
  void reset_parameters();

  const Variable& weight() const { return weight_; }  // undefined without elementwise_affine
  const Variable& bias() const { return bias_; }      // undefined without a bias
  const LayerNormOptions& options() const { return options_; }

 private:
  LayerNormOptions options_;
  Variable weight_, bias_;
};

}  // namespace nn
}  // namespace tessera
