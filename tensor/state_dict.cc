#include "tensor/state_dict.h"

#include <algorithm>

namespace tessera {

void StateDict::set(const std::string& name, Tensor tensor) {
  for (Item& item : items_) {
    if (item.first == name) {
      item.second = std::move(tensor);
      return;
    }
  }
  items_.emplace_back(name, std::move(tensor));
}

const Tensor* StateDict::find(const std::string& name) const {
  for (const Item& item : items_) {
    if (item.first == name) return &item.second;
  }
  return nullptr;
}

const Tensor& StateDict::at(const std::string& name) const {
  const Tensor* t = find(name);
  TS_CHECK(t != nullptr, "StateDict: no entry named '", name, "' (", items_.size(), " entries)");
  return *t;
}

void StateDict::erase(const std::string& name) {
  items_.erase(std::remove_if(items_.begin(), items_.end(),
                              [&](const Item& item) { return item.first == name; }),
               items_.end());
}

StateDict StateDict::with_prefix_removed(const std::string& prefix) const {
  StateDict out;
  for (const Item& item : items_) {
    if (item.first.compare(0, prefix.size(), prefix) == 0) {
      out.items_.emplace_back(item.first.substr(prefix.size()), item.second);
    }
  }
  return out;
}

void StateDict::merge(const StateDict& other, const std::string& prefix) {
  for (const Item& item : other.items_) set(prefix + item.first, item.second);
}

}  // namespace tessera
