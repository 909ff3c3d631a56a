// Module: the base of every layer and model, as in LibTorch.
//
// A module registers its parameters (Variables that require grad), buffers (Variables that do
// not: BatchNorm's running statistics) and child modules under names. named_parameters()
// walks them recursively in registration order with dotted names ("layer1.0.conv1.weight");
// that order is identical on every rank and is the contract DDP's buckets and ZeRO's shards
// rely on. Parameters and buffers are Variables, so to(DType) swaps their data in place and
// every holder (the layer's own members, an optimizer) sees the change.
//
// A module of your own needs only a constructor that registers what it holds and forward():
//
//   struct Net : nn::Module {
//     Variable forward(const Variable& x) override { return (*fc)(flatten(x, 1)); }
//     std::shared_ptr<nn::Linear> fc = register_module<nn::Linear>("fc", 784, 10);
//   };
//
// (*fc)(x) runs fc's forward hooks (operator() below); fc->forward(x) skips them, and what
// relies on them says so: FullyShardedDataParallel gathers a unit's parameters in its hooks, and
// between uses they are absent (tensor.h's absent()), so computing with one is an error naming
// the parameter and the call to make.
//
// Layers kept only as members, without register_module, have no parameters in parameters():
// an optimizer or DDP given such a model reports that it has none.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "autograd/variable.h"
#include "tensor/state_dict.h"

namespace tessera {
namespace nn {

// register_module<M>(name, args...) constructs; one argument that already is a pointer to an M
// goes to register_module(name, pointer) instead.
template <typename M, typename... Args>
struct ModulePointerArgument : std::false_type {};
template <typename M, typename A>
struct ModulePointerArgument<M, A> : std::is_convertible<A, std::shared_ptr<M>> {};

class Module : public std::enable_shared_from_this<Module> {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

 protected:
  // Moving lets a layer made as a temporary, nn::Linear(784, 128), go into the Sequential that
  // will hold it (sequential.h). Only a module nothing refers to yet may move: one owned by a
  // shared_ptr, or with forward hooks (which may point at it), is an error to move.
  Module(Module&& other);

 public:

  // One input, one output: what Sequential chains, DDP wraps and the pipeline cuts into stages.
  // A module that is only a container need not define it (calling it is then an error).
  virtual Variable forward(const Variable& x);
  // forward() between the forward hooks, as PyTorch's __call__: the pre-hooks run before it,
  // the hooks after it (each may replace the output). Composite modules call their children
  // this way (Sequential, the ResNet blocks), which is how dist::FullyShardedDataParallel
  // gathers a unit nested inside a block around the unit's own forward. Calling forward()
  // directly skips the hooks, as in PyTorch.
  Variable operator()(const Variable& x);
  // A tensor (a batch's inputs) called as a Variable that needs no gradient.
  Variable operator()(const Tensor& x) { return (*this)(Variable(x)); }
  // `body`, a forward of another signature (BatchNorm2d::forward_relu), between the forward
  // hooks as operator() runs forward(): such a call is still the module's forward to its hooks.
  Variable call_with_hooks(const std::function<Variable()>& body);
  using ForwardPreHook = std::function<void(Module&)>;
  using ForwardHook = std::function<Variable(Module&, const Variable& output)>;
  // Returns a handle for remove_forward_hook.
  int register_forward_pre_hook(ForwardPreHook hook);
  int register_forward_hook(ForwardHook hook);
  void remove_forward_hook(int handle);

  // The module's kind, for printing: the class name by default ("Linear", "MyNet"); the
  // details shown after it.
  virtual std::string type_name() const;
  virtual std::string extra_repr() const { return ""; }

  Variable register_parameter(const std::string& name, Tensor data, bool requires_grad = true);
  Variable register_buffer(const std::string& name, Tensor data);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }
  // Makes an M from `args` and registers it: one line declares, names and registers a layer,
  // as a member's initializer (members are initialized after Module itself):
  //   std::shared_ptr<nn::Linear> fc = register_module<nn::Linear>("fc", 784, 10);
  template <typename M, typename... Args,
            typename = std::enable_if_t<!ModulePointerArgument<M, Args...>::value>>
  std::shared_ptr<M> register_module(const std::string& name, Args&&... args) {
    return register_module(name, std::make_shared<M>(std::forward<Args>(args)...));
  }

  // Ties `name` to a parameter another module registered (weight tying: GPT-2's output
  // projection reads the token embedding's weight, PyTorch's `lm_head.weight = wte.weight`).
  // The module uses it in forward but does not own it: parameters(), state_dict() and to()
  // leave it to its owner, so a model lists, converts and saves it once, under the owner's
  // name. named_tied_parameters() lists it, so that what must know every module using a
  // parameter finds it in the module tree (dist::FullyShardedDataParallel puts a parameter that
  // modules of two units use in the unit enclosing both). Returns `parameter`.
  Variable register_tied_parameter(const std::string& name, const Variable& parameter);

  // Recursive, registration order, dotted names; a parameter shared by two modules is listed
  // once, under its first name.
  std::vector<std::pair<std::string, Variable>> named_parameters(bool recurse = true) const;
  // The tied parameters (register_tied_parameter) of this module and, recursively, its
  // descendants, under the tying modules' dotted names; each tie is listed.
  std::vector<std::pair<std::string, Variable>> named_tied_parameters(bool recurse = true) const;
  std::vector<Variable> parameters(bool recurse = true) const;
  std::vector<std::pair<std::string, Variable>> named_buffers(bool recurse = true) const;
  std::vector<Variable> buffers(bool recurse = true) const;
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& named_children() const {
    return children_;
  }
  // Puts `module` in the place of the direct child registered as `name` (same name, same place
  // in registration order) and returns the old child. Sequential, and any module that calls its
  // children through named_children(), then runs the new one; a module that also keeps the old
  // child in a member pointer of its own still calls the old one. This is how
  // dist::tensor_parallel::parallelize_module swaps a Linear for its parallel version.
  std::shared_ptr<Module> replace_module(const std::string& name, std::shared_ptr<Module> module);
  std::vector<std::shared_ptr<Module>> children() const;
  // This module ("") and every descendant, depth first (non-owning pointers).
  std::vector<std::pair<std::string, Module*>> named_modules();

  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // Converts floating-point parameters and buffers (integer buffers keep their dtype) and
  // drops gradients. Modules that keep_f32_under_half() (BatchNorm) stay f32 when the target is
  // f16 or bf16, as mixed-precision training wants (apex's keep_batchnorm_fp32): their
  // statistics would lose too much in half precision, and their forward takes half inputs.
  void to(DType dtype);
  void to(Device device);
  // The activations' memory format (PyTorch's model.to(memory_format=torch.channels_last)):
  // kChannelsLast makes every convolution read and write NHWC where the backend can, and the
  // layers after it (batch norm, pooling, elementwise) keep that layout; kChannelsBlocked does
  // the same with oneDNN's nChw16c (f32 on the CPU: the layout its convolution kernels compute
  // in, so no reorders around each call). The parameters do not change. Calls
  // set_memory_format on this module and every descendant.
  void to(MemoryFormat format);
  // What to(MemoryFormat) changes in this module alone (Conv2d: its channels_last and
  // channels_blocked options).
  virtual void set_memory_format(MemoryFormat /*format*/) {}
  // True for modules whose parameters and buffers stay f32 under to(kF16 / kBF16) (ZeRO-3's
  // mixed precision asks it too).
  virtual bool keep_f32_under_half() const { return false; }
  void zero_grad(bool set_to_none = true);

  // Parameters and buffers by dotted name (the tensors themselves, not copies, unless a module
  // overrides save_own_state below).
  StateDict state_dict() const;
  // Copies values into the registered tensors. Strict: a missing, unexpected or mis-shaped key
  // is an error listing every such key.
  void load_state_dict(const StateDict& state, bool strict = true);

  // One entry a module contributes to its state dict: the name (without the module's prefix),
  // and the shape and dtype the entry has in a state dict.
  struct StateEntry {
    std::string name;
    Shape shape;
    DType dtype;
  };
  // Every entry state_dict() would hold (dotted names, full shapes), without building it: no
  // tensor is copied or gathered, so it is not collective even for tensor-parallel layers.
  std::vector<StateEntry> state_entries() const;

  int64_t num_parameters() const;

 protected:
  // This module's own part of state_dict() and load_state_dict() (children are handled by the
  // base): by default its parameters, then its buffers, as they are. A module whose parameters
  // are slices of larger tensors (the tensor-parallel layers) overrides all three, so that its
  // state dict holds the full tensors (a checkpoint then moves between parallel and
  // non-parallel runs) and loading takes this rank's slice, as PyTorch's _save_to_state_dict /
  // _load_from_state_dict do.
  // The entries load_state_dict() expects (names without prefix, full shapes).
  virtual std::vector<StateEntry> own_state_entries() const;
  // Adds this module's entries to `out` under `prefix`.
  virtual void save_own_state(const std::string& prefix, StateDict& out) const;
  // Copies this module's entries from `state` (full names: prefix + name), which
  // load_state_dict() has already checked against own_state_entries(); absent ones are left.
  virtual void load_own_state(const std::string& prefix, const StateDict& state);

 public:
  // The module tree, one line per module.
  std::string str() const;

 private:
  void add_child(const std::string& name, std::shared_ptr<Module> module);
  void check_new_name(const std::string& name, const char* what) const;
  void collect(const std::string& prefix, bool recurse, bool buffers,
               std::vector<std::pair<std::string, Variable>>& out,
               std::vector<const VariableImpl*>& seen) const;
  void print(std::ostream& os, const std::string& name, int indent) const;
  std::vector<std::pair<int, ForwardPreHook>> forward_pre_hooks_;
  std::vector<std::pair<int, ForwardHook>> forward_hooks_;
  int next_hook_handle_ = 0;
  void save_state(const std::string& prefix, StateDict& out) const;
  void expected_state(const std::string& prefix, std::vector<StateEntry>& out) const;
  void load_state(const std::string& prefix, const StateDict& state);

  std::vector<std::pair<std::string, Variable>> parameters_;
  std::vector<std::pair<std::string, Variable>> tied_;  // register_tied_parameter's
  std::vector<std::pair<std::string, Variable>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

}  // namespace nn
}  // namespace tessera
