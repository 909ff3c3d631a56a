// Custom differentiable ops: FunctionNode and record(), how any differentiable op (tessera's own
// in autograd/functions.h, or a user's) joins the graph.
//
// An op computes its result on plain Tensors, then calls
//   record("ExpBackward", y, {a}, [y](const Tensor& g) -> Grads { return {g * y}; });
// The lambda is the op's backward: it receives the gradient of the result and returns one
// gradient per input (undefined where an input needs none). Whatever it captures is what the
// op saved; the engine drops the lambda after running it, which frees the saved tensors.
// Capture parameters as Variables (not their Tensor) so that backward reads the data the
// Variable holds at backward time, which ZeRO-3 re-gathers. Never capture the result Variable
// (that would make a reference cycle); capture its Tensor.
// When grad mode is off or no input requires grad, record() returns a plain leaf and the
// lambda is dropped unused.
#pragma once

#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "autograd/variable.h"

namespace tessera {

using Grads = std::vector<Tensor>;
using BackwardFn = std::function<Grads(const Tensor& grad)>;

class FunctionNode final : public Node {
 public:
  FunctionNode(std::string name, BackwardFn backward)
      : Node(1), name_(std::move(name)), backward_(std::move(backward)) {}
  std::string name() const override { return name_; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  void release_saved() override {
    Node::release_saved();
    backward_ = nullptr;
  }

 private:
  std::string name_;
  BackwardFn backward_;
};

// True when grad mode is on and some input requires grad.
bool any_requires_grad(const std::vector<Variable>& inputs);

Variable record(const char* name, Tensor result, const std::vector<Variable>& inputs,
                BackwardFn backward);
// record()'s last step for any node: `node` gets one edge per input and `result` becomes its
// output (record_split in weight_grad.h uses it too).
Variable attach(Tensor result, std::shared_ptr<Node> node, const std::vector<Variable>& inputs);

}  // namespace tessera
