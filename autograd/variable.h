// Variable: a Tensor that autograd tracks.
//
// A Variable is a cheap handle (a shared_ptr to its state): copies share data, grad and hooks.
// It holds the tensor (`data()`), the accumulated gradient (`grad()`, a plain Tensor),
// `requires_grad`, a name, and, for results of differentiable ops, the Node that made it
// (`grad_fn()`) and which of that node's outputs it is. Leaves (no grad_fn) that require grad
// are parameters or inputs: backward accumulates into their grad.
//
// Two kinds of hooks are the contract the parallel layers are built on:
//  * grad-ready hooks (leaves only) fire right after the leaf's grad has been accumulated
//    during backward: DDP launches bucket all-reduces from them, ZeRO-2 reduce-scatters.
//  * pre-backward hooks fire when the gradient with respect to this Variable arrives, before
//    the node that produced it runs (for a leaf: before accumulation). They may replace the
//    gradient. ZeRO-3 re-gathers parameters from them; pipeline stages use them to learn the
//    output gradient.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace tessera {

class Node;
class Variable;
struct VariableImpl;

using PreBackwardHook = std::function<void(Tensor& grad)>;
using GradReadyHook = std::function<void(Variable& leaf)>;

class Variable {
 public:
  Variable() = default;
  // A leaf.
  explicit Variable(Tensor data, bool requires_grad = false);
  // The result of a differentiable op: output `output_nr` of `grad_fn`.
  static Variable from_node(Tensor data, std::shared_ptr<Node> grad_fn, uint32_t output_nr = 0);

  bool defined() const { return impl_ != nullptr; }
  const Tensor& data() const;
  // Replaces the tensor (same shape and dtype expected by the graph); ZeRO-3 swaps parameters'
  // storage this way.
  void set_data(Tensor data) const;
  const Tensor& grad() const;
  void set_grad(Tensor grad) const;
  // Drops the gradient (set_to_none, PyTorch's default) or zeroes it in place.
  void zero_grad(bool set_to_none = true) const;

  bool requires_grad() const;
  void set_requires_grad(bool requires_grad) const;  // leaves only
  bool is_leaf() const;
  const std::shared_ptr<Node>& grad_fn() const;
  uint32_t output_nr() const;
  const std::string& name() const;
  void set_name(std::string name) const;
  // Who holds this parameter's whole, reduced gradient when its own grad() is not it (ZeRO's
  // flat shards, FSDP's units), and how to clip it: set by dist/, read by optim::clip_grad_norm
  // so that the generic call refuses instead of clipping a local or released gradient. Empty
  // when grad() is the gradient (one process, DDP after backward).
  const std::string& grad_held_by() const;
  void set_grad_held_by(std::string holder) const;

  // The same tensor, cut from the graph (a leaf that does not require grad).
  Variable detach() const;

  // Backpropagates from this Variable. `grad` defaults to 1 for a one-element Variable.
  void backward(const Tensor& grad = Tensor(), bool retain_graph = false) const;

  // Hooks; each returns a handle for remove_hook().
  int register_hook(PreBackwardHook hook) const;
  int register_grad_ready_hook(GradReadyHook hook) const;
  void remove_hook(int handle) const;

  // For leaves that require grad: the node that accumulates into grad (created on first use,
  // shared by every use of the leaf in one graph).
  std::shared_ptr<Node> grad_accumulator() const;

  // Tensor-like conveniences.
  const Shape& shape() const { return data().shape(); }
  int64_t size(int64_t d) const { return data().size(d); }
  int64_t dim() const { return data().dim(); }
  int64_t numel() const { return data().numel(); }
  DType dtype() const { return data().dtype(); }
  Device device() const { return data().device(); }
  double item() const { return data().item(); }

  VariableImpl* impl() const { return impl_.get(); }
  bool is_same(const Variable& other) const { return impl_ == other.impl_; }

 private:
  std::shared_ptr<VariableImpl> impl_;
};

struct VariableImpl {
  Tensor data;
  Tensor grad;
  bool requires_grad = false;
  std::shared_ptr<Node> grad_fn;
  uint32_t output_nr = 0;
  std::string name;
  std::string grad_held_by;
  std::weak_ptr<Node> grad_accumulator;
  // Leaves keep their hooks here (a non-leaf's pre-backward hooks live on its grad_fn).
  std::vector<std::pair<int, PreBackwardHook>> pre_hooks;
  std::vector<std::pair<int, GradReadyHook>> grad_ready_hooks;
};

}  // namespace tessera
