// Dropout: in training, zeroes each element with probability p and scales the others by
// 1/(1-p) (masks from the default generator); the identity in eval.
#pragma once

#include "nn/module.h"

namespace tessera {
namespace nn {

class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  std::string type_name() const override { return "Dropout"; }
  std::string extra_repr() const override;
  Variable forward(const Variable& x) override;

 private:
  double p_;
};

}  // namespace nn
}  // namespace tessera
