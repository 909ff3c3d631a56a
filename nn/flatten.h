// Shape layers: Flatten (dims start..end into one, from dim 1 by default) and Identity.
#pragma once

#include "nn/module.h"

namespace tessera {
namespace nn {

class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1)
      : start_dim_(start_dim), end_dim_(end_dim) {}
  std::string type_name() const override { return "Flatten"; }
  Variable forward(const Variable& x) override;

 private:
  int64_t start_dim_, end_dim_;
};

class Identity : public Module {
 public:
  std::string type_name() const override { return "Identity"; }
  Variable forward(const Variable& x) override { return x; }
};

}  // namespace nn
}  // namespace tessera
