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

}  // namespace nn
}  // namespace tessera
