// StateDict: named tensors in insertion order (a model's parameters and buffers, an
// optimizer's state), the unit checkpoints save and load.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace tessera {

class StateDict {
 public:
  using Item = std::pair<std::string, Tensor>;

  // Adds or replaces `name`.
  void set(const std::string& name, Tensor tensor);
  bool contains(const std::string& name) const { return find(name) != nullptr; }
  // nullptr when absent.
  const Tensor* find(const std::string& name) const;
  // Error naming the key when absent.
  const Tensor& at(const std::string& name) const;
  void erase(const std::string& name);

  const std::vector<Item>& items() const { return items_; }
  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

  // The entries whose names start with prefix, with the prefix removed.
  StateDict with_prefix_removed(const std::string& prefix) const;
  // Every entry of `other`, its name prefixed.
  void merge(const StateDict& other, const std::string& prefix = "");

 private:
  std::vector<Item> items_;
};

}  // namespace tessera
