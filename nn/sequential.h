// Sequential: layers applied in order. Children are named by position ("0", "1", ...) unless
// given names, so parameter names read "3.conv1.weight" as in PyTorch. slice(begin, end) is a
// Sequential over some of the same layers (shared, not copied) under their original names:
// that is how the pipeline cuts a model into stages. The layers are the module's children
// (named_children()), so replace_module() swaps a layer in place.
//
// Made from a list of layers, as LibTorch's Sequential is: temporaries move in, shared_ptrs
// are shared (a layer held elsewhere too, as a member or by another Sequential):
//
//   nn::Sequential net{nn::Linear(784, 128), nn::ReLU(), nn::Linear(128, 10)};
//   auto net = std::make_shared<nn::Sequential>(nn::Linear(784, 128), nn::ReLU(), head);
//
// A named layer variable (an lvalue) is not moved in behind its owner's back: it is a compile
// error, and moving one that a shared_ptr owns is a run-time error (Module's move).
#pragma once

#include <initializer_list>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "nn/module.h"

namespace tessera {
namespace nn {

// A layer Sequential takes: a Module (moved in) or a shared_ptr to one.
template <typename T>
constexpr bool is_sequential_layer_v =
    std::is_base_of_v<Module, std::decay_t<T>> || std::is_convertible_v<T, std::shared_ptr<Module>>;

class Sequential : public Module {
 public:
  Sequential() = default;
  Sequential(std::initializer_list<std::shared_ptr<Module>> layers);
  template <typename... Layers,
            std::enable_if_t<(sizeof...(Layers) > 0) && (is_sequential_layer_v<Layers> && ...), int> = 0>
  explicit Sequential(Layers&&... layers) {
    (push_back(std::forward<Layers>(layers)), ...);
  }

  void push_back(std::shared_ptr<Module> layer);
  void push_back(const std::string& name, std::shared_ptr<Module> layer);
  // A layer made in place: push_back(nn::ReLU()), push_back("fc", nn::Linear(128, 10)).
  template <typename M, std::enable_if_t<std::is_base_of_v<Module, std::decay_t<M>>, int> = 0>
  void push_back(M&& layer) {
    push_back(std::to_string(size()), std::forward<M>(layer));
  }
  template <typename M, std::enable_if_t<std::is_base_of_v<Module, std::decay_t<M>>, int> = 0>
  void push_back(const std::string& name, M&& layer) {
    static_assert(!std::is_lvalue_reference_v<M>,
                  "Sequential: pass a layer as a temporary (nn::Linear(4, 2)) or as a shared_ptr; "
                  "a named layer is not moved in, since its owner may still use it");
    push_back(name, std::static_pointer_cast<Module>(
                        std::make_shared<std::decay_t<M>>(std::forward<M>(layer))));
  }

  size_t size() const { return named_children().size(); }
  const std::shared_ptr<Module>& operator[](size_t i) const;
  const std::string& name_at(size_t i) const;
  std::shared_ptr<Sequential> slice(size_t begin, size_t end) const;

  std::string type_name() const override { return "Sequential"; }
  Variable forward(const Variable& x) override;
};

}  // namespace nn
}  // namespace tessera
