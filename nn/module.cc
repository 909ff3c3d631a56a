#include "nn/module.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <typeinfo>

#include "tensor/ops.h"

namespace tessera {
namespace nn {

Module::Module(Module&& other) {
  const bool shared = !other.weak_from_this().expired();
  TS_CHECK(!shared && other.forward_pre_hooks_.empty() && other.forward_hooks_.empty(),
           "Module: a ", other.type_name(), " ", shared ? "held by a shared_ptr" : "with forward hooks",
           " cannot be moved (others refer to it); move only a layer made as a temporary");
  next_hook_handle_ = other.next_hook_handle_;
  parameters_ = std::move(other.parameters_);
  tied_ = std::move(other.tied_);
  buffers_ = std::move(other.buffers_);
  children_ = std::move(other.children_);
  training_ = other.training_;
}

Variable Module::forward(const Variable&) {
  TS_FAIL(type_name(), " has no forward(const Variable&): define it to use the module as a layer "
          "(in Sequential, DDP or a pipeline)");
}

Variable Module::operator()(const Variable& x) {
  if (forward_pre_hooks_.empty() && forward_hooks_.empty()) return forward(x);
  return call_with_hooks([&] { return forward(x); });
}

Variable Module::call_with_hooks(const std::function<Variable()>& body) {
  // Copies: a hook may remove itself (or another) while running.
  const auto pre_hooks = forward_pre_hooks_;
  for (const auto& [handle, hook] : pre_hooks) hook(*this);
  Variable out = body();
  const auto hooks = forward_hooks_;
  for (const auto& [handle, hook] : hooks) out = hook(*this, out);
  return out;
}

int Module::register_forward_pre_hook(ForwardPreHook hook) {
  TS_CHECK(hook != nullptr, type_name(), "::register_forward_pre_hook: the hook is empty");
  forward_pre_hooks_.emplace_back(next_hook_handle_, std::move(hook));
  return next_hook_handle_++;
}

int Module::register_forward_hook(ForwardHook hook) {
  TS_CHECK(hook != nullptr, type_name(), "::register_forward_hook: the hook is empty");
  forward_hooks_.emplace_back(next_hook_handle_, std::move(hook));
  return next_hook_handle_++;
}

void Module::remove_forward_hook(int handle) {
  const auto matches = [handle](const auto& entry) { return entry.first == handle; };
  const size_t before = forward_pre_hooks_.size() + forward_hooks_.size();
  forward_pre_hooks_.erase(
      std::remove_if(forward_pre_hooks_.begin(), forward_pre_hooks_.end(), matches),
      forward_pre_hooks_.end());
  forward_hooks_.erase(std::remove_if(forward_hooks_.begin(), forward_hooks_.end(), matches),
                       forward_hooks_.end());
  TS_CHECK(forward_pre_hooks_.size() + forward_hooks_.size() + 1 == before, type_name(),
           "::remove_forward_hook: no hook with handle ", handle);
}

std::string Module::type_name() const {
  // The dynamic class's name without its namespaces: "tessera::nn::Linear" -> "Linear".
  const char* mangled = typeid(*this).name();
  int status = 0;
  char* demangled = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string name = status == 0 && demangled != nullptr ? demangled : mangled;
  std::free(demangled);
  const size_t colon = name.rfind("::");
  return colon == std::string::npos ? name : name.substr(colon + 2);
}

void Module::check_new_name(const std::string& name, const char* what) const {
  TS_CHECK(!name.empty() && name.find('.') == std::string::npos, type_name(), ": ", what,
           " name '", name, "' must be non-empty and contain no '.'");
  auto taken = [&](const auto& list) {
    return std::any_of(list.begin(), list.end(), [&](const auto& e) { return e.first == name; });
  };
  TS_CHECK(!taken(parameters_) && !taken(tied_) && !taken(buffers_) && !taken(children_),
           type_name(), ": ", what, " name '", name, "' is already registered");
}

Variable Module::register_parameter(const std::string& name, Tensor data, bool requires_grad) {
  check_new_name(name, "parameter");
  Variable v(std::move(data), requires_grad);
  v.set_name(name);
  parameters_.emplace_back(name, v);
  return v;
}

Variable Module::register_tied_parameter(const std::string& name, const Variable& parameter) {
  check_new_name(name, "tied parameter");
  TS_CHECK(parameter.defined() && parameter.is_leaf() && parameter.requires_grad(), type_name(),
           ": tied parameter '", name, "' must be another module's parameter (a leaf that "
           "requires grad)");
  tied_.emplace_back(name, parameter);
  return parameter;
}

std::vector<std::pair<std::string, Variable>> Module::named_tied_parameters(bool recurse) const {
  std::vector<std::pair<std::string, Variable>> out = tied_;
  if (!recurse) return out;
  for (const auto& [name, child] : children_) {
    for (auto& [sub, p] : child->named_tied_parameters(true)) out.emplace_back(name + "." + sub, p);
  }
  return out;
}

Variable Module::register_buffer(const std::string& name, Tensor data) {
  check_new_name(name, "buffer");
  Variable v(std::move(data), false);
  v.set_name(name);
  buffers_.emplace_back(name, v);
  return v;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check_new_name(name, "module");
  TS_CHECK(module != nullptr, type_name(), ": module '", name, "' is null");
  children_.emplace_back(name, std::move(module));
}

void Module::collect(const std::string& prefix, bool recurse, bool buffers,
                     std::vector<std::pair<std::string, Variable>>& out,
                     std::vector<const VariableImpl*>& seen) const {
  for (const auto& [name, v] : buffers ? buffers_ : parameters_) {
    if (std::find(seen.begin(), seen.end(), v.impl()) != seen.end()) continue;
    seen.push_back(v.impl());
    out.emplace_back(prefix + name, v);
  }
  if (!recurse) return;
  for (const auto& [name, child] : children_) {
    child->collect(prefix + name + ".", true, buffers, out, seen);
  }
}

std::vector<std::pair<std::string, Variable>> Module::named_parameters(bool recurse) const {
  std::vector<std::pair<std::string, Variable>> out;
  std::vector<const VariableImpl*> seen;
  collect("", recurse, false, out, seen);
  return out;
}

std::vector<Variable> Module::parameters(bool recurse) const {
  std::vector<Variable> out;
  for (auto& [name, v] : named_parameters(recurse)) out.push_back(v);
  return out;
}

std::vector<std::pair<std::string, Variable>> Module::named_buffers(bool recurse) const {
  std::vector<std::pair<std::string, Variable>> out;
  std::vector<const VariableImpl*> seen;
  collect("", recurse, true, out, seen);
  return out;
}

std::vector<Variable> Module::buffers(bool recurse) const {
  std::vector<Variable> out;
  for (auto& [name, v] : named_buffers(recurse)) out.push_back(v);
  return out;
}

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (const auto& [name, child] : children_) out.push_back(child);
  return out;
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out{{"", this}};
  for (const auto& [name, child] : children_) {
    for (auto& [sub, m] : child->named_modules()) {
      out.emplace_back(sub.empty() ? name : name + "." + sub, m);
    }
  }
  return out;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

void Module::to(DType dtype) {
  const bool half = is_half(dtype);
  const DType mine = half && keep_f32_under_half() ? kF32 : dtype;
  for (auto* list : {&parameters_, &buffers_}) {
    for (auto& [name, v] : *list) {
      if (!is_floating(v.dtype())) continue;
      v.set_data(v.data().to(mine));
      v.zero_grad();
    }
  }
  for (auto& [name, child] : children_) child->to(dtype);
}

void Module::to(MemoryFormat format) {
  set_memory_format(format);
  for (auto& [name, child] : children_) child->to(format);
}

void Module::to(Device device) {
  for (auto* list : {&parameters_, &buffers_}) {
    for (auto& [name, v] : *list) {
      v.set_data(v.data().to(device));
      v.zero_grad();
    }
  }
  for (auto& [name, child] : children_) child->to(device);
}

void Module::zero_grad(bool set_to_none) {
  for (Variable& p : parameters()) p.zero_grad(set_to_none);
}

std::shared_ptr<Module> Module::replace_module(const std::string& name,
                                               std::shared_ptr<Module> module) {
  TS_CHECK(module != nullptr, type_name(), "::replace_module: the new module '", name,
           "' is null");
  for (auto& [child_name, child] : children_) {
    if (child_name == name) {
      std::shared_ptr<Module> old = std::move(child);
      child = std::move(module);
      return old;
    }
  }
  std::vector<std::string> names;
  for (const auto& [child_name, child] : children_) names.push_back(child_name);
  TS_FAIL(type_name(), "::replace_module: no child named '", name, "' (children: ", names, ")");
}

std::vector<Module::StateEntry> Module::own_state_entries() const {
  std::vector<StateEntry> entries;
  for (const auto* list : {&parameters_, &buffers_}) {
    for (const auto& [name, v] : *list) entries.push_back({name, v.shape(), v.dtype()});
  }
  return entries;
}

void Module::save_own_state(const std::string& prefix, StateDict& out) const {
  // PyTorch's order: each module's parameters, then its buffers, then its children.
  for (const auto& [name, v] : parameters_) out.set(prefix + name, v.data());
  for (const auto& [name, v] : buffers_) out.set(prefix + name, v.data());
}

void Module::load_own_state(const std::string& prefix, const StateDict& state) {
  for (const auto* list : {&parameters_, &buffers_}) {
    for (const auto& [name, v] : *list) {
      if (const Tensor* source = state.find(prefix + name)) Tensor(v.data()).copy_(*source);
    }
  }
}

void Module::save_state(const std::string& prefix, StateDict& out) const {
  save_own_state(prefix, out);
  for (const auto& [name, child] : children_) child->save_state(prefix + name + ".", out);
}

void Module::expected_state(const std::string& prefix, std::vector<StateEntry>& out) const {
  for (StateEntry e : own_state_entries()) {
    e.name = prefix + e.name;
    out.push_back(std::move(e));
  }
  for (const auto& [name, child] : children_) child->expected_state(prefix + name + ".", out);
}

void Module::load_state(const std::string& prefix, const StateDict& state) {
  load_own_state(prefix, state);
  for (const auto& [name, child] : children_) child->load_state(prefix + name + ".", state);
}

std::vector<Module::StateEntry> Module::state_entries() const {
  std::vector<StateEntry> entries;
  expected_state("", entries);
  return entries;
}

StateDict Module::state_dict() const {
  StateDict state;
  save_state("", state);
  return state;
}

void Module::load_state_dict(const StateDict& state, bool strict) {
  std::vector<std::string> missing, unexpected, mismatched, other_kind;
  const std::vector<StateEntry> expected = state_entries();
  for (const StateEntry& e : expected) {
    const Tensor* source = state.find(e.name);
    if (source == nullptr) {
      missing.push_back(e.name);
      continue;
    }
    if (source->shape() != e.shape) {
      mismatched.push_back(e.name + " (checkpoint " + shape_str(source->shape()) + ", model " +
                           shape_str(e.shape) + ")");
    }
    // Precision converts on copy (f16 into f32); a kind does not (tensor/dtype.h).
    if (std::string(dtype_kind(source->dtype())) != dtype_kind(e.dtype)) {
      other_kind.push_back(e.name + " (checkpoint " + dtype_name(source->dtype()) + ", model " +
                           dtype_name(e.dtype) + ")");
    }
  }
  for (const auto& [name, t] : state) {
    const bool known = std::any_of(expected.begin(), expected.end(),
                                   [&](const StateEntry& e) { return e.name == name; });
    if (!known) unexpected.push_back(name);
  }
  TS_CHECK(mismatched.empty(), "load_state_dict: shape mismatch for ", mismatched);
  TS_CHECK(other_kind.empty(), "load_state_dict: dtype of another kind for ", other_kind,
           " (floating-point, integer and bool tensors do not convert into each other: a "
           "relabelled or foreign file?)");
  TS_CHECK(!strict || (missing.empty() && unexpected.empty()),
           "load_state_dict: missing keys ", missing, ", unexpected keys ", unexpected);
  load_state("", state);
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const Variable& p : parameters()) n += p.numel();
  return n;
}

void Module::print(std::ostream& os, const std::string& name, int indent) const {
  os << std::string(indent, ' ') << (name.empty() ? "" : "(" + name + "): ") << type_name();
  const std::string extra = extra_repr();
  if (!extra.empty()) os << "(" << extra << ")";
  os << "\n";
  for (const auto& [child_name, child] : children_) child->print(os, child_name, indent + 2);
}

std::string Module::str() const {
  std::ostringstream os;
  print(os, "", 0);
  return os.str();
}

}  // namespace nn
}  // namespace tessera
