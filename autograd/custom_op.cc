#include "autograd/custom_op.h"

#include "autograd/grad_mode.h"

namespace tessera {

std::vector<Tensor> FunctionNode::apply(std::vector<Tensor>&& grads) {
  check_not_released();
  Grads out = backward_(grads[0]);
  TS_INTERNAL_ASSERT(out.size() == next_edges().size(), name_, " returned ", out.size(),
                     " gradients for ", next_edges().size(), " inputs");
  return out;
}

bool any_requires_grad(const std::vector<Variable>& inputs) {
  if (!GradMode::is_enabled()) return false;
  for (const Variable& v : inputs) {
    if (v.defined() && v.requires_grad()) return true;
  }
  return false;
}

Variable record(const char* name, Tensor result, const std::vector<Variable>& inputs,
                BackwardFn backward) {
  if (!any_requires_grad(inputs)) return Variable(std::move(result));
  return attach(std::move(result), std::make_shared<FunctionNode>(name, std::move(backward)), inputs);
}

Variable attach(Tensor result, std::shared_ptr<Node> node, const std::vector<Variable>& inputs) {
  std::vector<Edge> edges;
  edges.reserve(inputs.size());
  for (const Variable& v : inputs) edges.push_back(gradient_edge(v));
  node->set_next_edges(std::move(edges));
  return Variable::from_node(std::move(result), std::move(node));
}

}  // namespace tessera
