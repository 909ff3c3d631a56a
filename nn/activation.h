// Elementwise activation layers.
#pragma once

#include "nn/module.h"

namespace tessera {
namespace nn {

class ReLU : public Module {
 public:
  std::string type_name() const override { return "ReLU"; }
  Variable forward(const Variable& x) override;
};

class Sigmoid : public Module {
 public:
  std::string type_name() const override { return "Sigmoid"; }
  Variable forward(const Variable& x) override;
};

class Tanh : public Module {
 public:
  std::string type_name() const override { return "Tanh"; }
  Variable forward(const Variable& x) override;
};

// GELU (Hendrycks and Gimpel), x * Phi(x), the transformers' activation. Its default is
// PyTorch's exact form, nn.GELU(); GPT-2 uses the tanh approximation:
//   nn::GELU(GeluApproximate::kTanh)   // PyTorch's nn.GELU(approximate='tanh')
class GELU : public Module {
 public:
  explicit GELU(GeluApproximate approximate = GeluApproximate::kNone)
      : approximate_(approximate) {}
  std::string type_name() const override { return "GELU"; }
  std::string extra_repr() const override;
  Variable forward(const Variable& x) override;
  GeluApproximate approximate() const { return approximate_; }

 private:
  GeluApproximate approximate_;
};

}  // namespace nn
}  // namespace tessera
