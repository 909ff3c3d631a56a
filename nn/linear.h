// Linear: y = x W^T + b, with W [out, in]; PyTorch's default init (kaiming-uniform with
// a = sqrt(5), i.e. U(-1/sqrt(in), 1/sqrt(in)), and the same bound for the bias).
#pragma once

#include "nn/module.h"

namespace tessera {
namespace nn {

class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  std::string type_name() const override { return "Linear"; }
  std::string extra_repr() const override;
  Variable forward(const Variable& x) override;
  // Re-draws the parameters from the default generator, as at construction.
  void reset_parameters();

  const Variable& weight() const { return weight_; }
  const Variable& bias() const { return bias_; }  // undefined without bias

 private:
  int64_t in_features_, out_features_;
  Variable weight_, bias_;
};

}  // namespace nn
}  // namespace tessera
