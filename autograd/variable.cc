#include "autograd/variable.h"

#include <algorithm>

#include "autograd/engine.h"
#include "autograd/node.h"
#include "tensor/ops.h"

namespace tessera {

namespace {
VariableImpl& checked(const std::shared_ptr<VariableImpl>& impl) {
  TS_CHECK(impl != nullptr, "Variable: use of an undefined Variable");
  return *impl;
}
}  // namespace

Variable::Variable(Tensor data, bool requires_grad) : impl_(std::make_shared<VariableImpl>()) {
  TS_CHECK(data.defined(), "Variable: cannot wrap an undefined tensor");
  TS_CHECK(!requires_grad || is_floating(data.dtype()),
           "Variable: only floating-point tensors can require grad, got ", data.dtype());
  impl_->data = std::move(data);
  impl_->requires_grad = requires_grad;
}

Variable Variable::from_node(Tensor data, std::shared_ptr<Node> grad_fn, uint32_t output_nr) {
  Variable v(std::move(data), false);
  v.impl_->grad_fn = std::move(grad_fn);
  v.impl_->output_nr = output_nr;
  return v;
}

const Tensor& Variable::data() const { return checked(impl_).data; }

void Variable::set_data(Tensor data) const {
  TS_CHECK(data.defined(), "Variable::set_data: undefined tensor");
  checked(impl_).data = std::move(data);
}

const Tensor& Variable::grad() const { return checked(impl_).grad; }

void Variable::set_grad(Tensor grad) const {
  if (grad.defined()) {
    TS_CHECK(grad.shape() == data().shape(), "Variable::set_grad: grad shape ", grad.shape(),
             " differs from data shape ", data().shape(), " (", name(), ")");
  }
  checked(impl_).grad = std::move(grad);
}

void Variable::zero_grad(bool set_to_none) const {
  Tensor& g = checked(impl_).grad;
  if (!g.defined()) return;
  if (set_to_none) {
    g = Tensor();
  } else {
    g.zero_();
  }
}

bool Variable::requires_grad() const {
  const VariableImpl& v = checked(impl_);
  return v.requires_grad || v.grad_fn != nullptr;
}

void Variable::set_requires_grad(bool requires_grad) const {
  TS_CHECK(is_leaf(), "set_requires_grad: only leaves can change requires_grad (", name(),
           " was produced by ", grad_fn()->name(), ")");
  TS_CHECK(!requires_grad || is_floating(dtype()),
           "set_requires_grad: only floating-point tensors can require grad, got ", dtype());
  impl_->requires_grad = requires_grad;
}

bool Variable::is_leaf() const { return checked(impl_).grad_fn == nullptr; }
const std::shared_ptr<Node>& Variable::grad_fn() const { return checked(impl_).grad_fn; }
uint32_t Variable::output_nr() const { return checked(impl_).output_nr; }
const std::string& Variable::name() const { return checked(impl_).name; }
void Variable::set_name(std::string name) const { checked(impl_).name = std::move(name); }
const std::string& Variable::grad_held_by() const { return checked(impl_).grad_held_by; }
void Variable::set_grad_held_by(std::string holder) const {
  checked(impl_).grad_held_by = std::move(holder);
}

Variable Variable::detach() const { return Variable(data(), false); }

void Variable::backward(const Tensor& grad, bool retain_graph) const {
  tessera::backward({*this}, grad.defined() ? std::vector<Tensor>{grad} : std::vector<Tensor>{},
                    retain_graph);
}

int Variable::register_hook(PreBackwardHook hook) const {
  TS_CHECK(requires_grad(), "register_hook: ", name().empty() ? "this variable" : name(),
           " does not require grad, so no gradient will ever arrive");
  if (!is_leaf()) return grad_fn()->add_pre_hook(output_nr(), std::move(hook));
  const int handle = next_hook_handle();
  impl_->pre_hooks.emplace_back(handle, std::move(hook));
  return handle;
}

int Variable::register_grad_ready_hook(GradReadyHook hook) const {
  TS_CHECK(is_leaf() && requires_grad(), "register_grad_ready_hook: only leaves that require "
           "grad have their gradient accumulated (", name(), ")");
  const int handle = next_hook_handle();
  impl_->grad_ready_hooks.emplace_back(handle, std::move(hook));
  return handle;
}

void Variable::remove_hook(int handle) const {
  VariableImpl& v = checked(impl_);
  auto erase = [handle](auto& hooks) {
    const auto it = std::remove_if(hooks.begin(), hooks.end(),
                                   [handle](const auto& h) { return h.first == handle; });
    const bool found = it != hooks.end();
    hooks.erase(it, hooks.end());
    return found;
  };
  if (erase(v.pre_hooks) || erase(v.grad_ready_hooks)) return;
  if (v.grad_fn && v.grad_fn->remove_pre_hook(handle)) return;
  TS_FAIL("remove_hook: no hook with handle ", handle, " on ", name());
}

std::shared_ptr<Node> Variable::grad_accumulator() const {
  VariableImpl& v = checked(impl_);
  TS_CHECK(v.grad_fn == nullptr && v.requires_grad,
           "grad_accumulator: only leaves that require grad have one");
  std::shared_ptr<Node> node = v.grad_accumulator.lock();
  if (!node) {
    node = std::make_shared<AccumulateGrad>(*this);
    v.grad_accumulator = node;
  }
  return node;
}

}  // namespace tessera
