// Sequential: layers applied in order. Children are named by position ("0", "1", ...) unless
// given names, so parameter names read "3.conv1.weight" as in PyTorch. slice(begin, end) is a
// Sequential over some of the same layers (shared, not copied) under their original names:
// that is how the pipeline cuts a model into stages. The layers are the module's children
// (named_children()), so replace_module() swaps a layer in place.
#pragma once

#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "nn/module.h"

namespace tessera {
namespace nn {

class Sequential : public Module {
 public:
  Sequential() = default;
  Sequential(std::initializer_list<std::shared_ptr<Module>> layers);

  void push_back(std::shared_ptr<Module> layer);
  void push_back(const std::string& name, std::shared_ptr<Module> layer);

  size_t size() const { return named_children().size(); }
  const std::shared_ptr<Module>& operator[](size_t i) const;
  const std::string& name_at(size_t i) const;
  std::shared_ptr<Sequential> slice(size_t begin, size_t end) const;

  std::string type_name() const override { return "Sequential"; }
  Variable forward(const Variable& x) override;
};

}  // namespace nn
}  // namespace tessera
