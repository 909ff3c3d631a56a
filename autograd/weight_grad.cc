#include "autograd/weight_grad.h"

#include <utility>

#include "autograd/engine.h"
#include "autograd/node.h"
#include "tensor/ops.h"

namespace tessera {

namespace {

thread_local WeightGradStore* current_store = nullptr;

// Hands a gradient W computed to the input it belongs to: straight into a leaf's accumulator
// (as the engine would), or through a small backward from the node in between (a cast).
void deliver(const Edge& edge, Tensor grad) {
  if (!edge.valid() || !grad.defined()) return;
  if (auto* acc = dynamic_cast<AccumulateGrad*>(edge.node.get())) {
    std::vector<Tensor> grads{std::move(grad)};
    acc->run_pre_hooks(grads);
    acc->apply(std::move(grads));
    return;
  }
  const Tensor root = grad;
  backward({Variable::from_node(root, edge.node, edge.input_nr)}, {grad});
}

class SplitFunctionNode final : public Node {
 public:
  SplitFunctionNode(std::string name, BackwardFn input_backward, BackwardFn weight_backward,
                    int64_t weight_bytes, BackwardFn joint_backward)
      : Node(1), name_(std::move(name)), input_(std::move(input_backward)),
        weight_(std::move(weight_backward)), joint_(std::move(joint_backward)),
        weight_bytes_(weight_bytes) {}
  std::string name() const override { return name_; }

  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    check_not_released();
    const Tensor g = grads[0];
    WeightGradStore* store = current_weight_grad_store();
    if (store == nullptr && joint_) {
      Grads out = joint_(g);
      TS_INTERNAL_ASSERT(out.size() == next_edges().size(), name_, " returned ", out.size(),
                         " gradients for ", next_edges().size(), " inputs");
      return out;
    }
    Grads out = input_(g);
    TS_INTERNAL_ASSERT(out.size() == next_edges().size(), name_, " returned ", out.size(),
                       " input gradients for ", next_edges().size(), " inputs");
    if (store == nullptr) {
      Grads w = weight_(g);
      for (size_t i = 0; i < out.size(); ++i) {
        if (w[i].defined()) out[i] = out[i].defined() ? add(out[i], w[i]) : w[i];
      }
      return out;
    }
    // W: the weight work and the edges it feeds, held by the store until it runs.
    store->add([weight = weight_, g, edges = next_edges(), name = name_] {
                 Grads w = weight(g);
                 TS_INTERNAL_ASSERT(w.size() == edges.size(), name, " returned ", w.size(),
                                    " weight gradients for ", edges.size(), " inputs");
                 for (size_t i = 0; i < edges.size(); ++i) deliver(edges[i], std::move(w[i]));
               },
               weight_bytes_ + static_cast<int64_t>(g.nbytes()));
    return out;
  }
  void release_saved() override {
    Node::release_saved();
    input_ = nullptr;
    weight_ = nullptr;
    joint_ = nullptr;
  }

 private:
  std::string name_;
  BackwardFn input_, weight_, joint_;
  int64_t weight_bytes_;
};

}  // namespace

void WeightGradStore::add(std::function<void()> work, int64_t bytes) {
  work_.emplace_back(std::move(work), bytes);
  held_bytes_ += bytes;
}

void WeightGradStore::defer_leaves(const std::vector<Variable>& leaves) {
  for (const Variable& v : leaves) deferred_leaves_.insert(v.impl());
}

void WeightGradStore::hold_callbacks(std::vector<std::function<void()>> callbacks) {
  for (auto& c : callbacks) callbacks_.push_back(std::move(c));
}

void WeightGradStore::run() {
  // W itself defers nothing (a guard for another store may be active around it).
  WeightGradStore* outer = current_store;
  current_store = nullptr;
  struct Restore {
    WeightGradStore* store;
    ~Restore() { current_store = store; }
  } restore{outer};
  run_as_backward([this] {
    // Callbacks B queued run after every W (queued first, run at the end in order).
    std::vector<std::function<void()>> held = std::move(callbacks_);
    callbacks_.clear();
    for (auto& c : held) queue_callback(std::move(c));
    while (!work_.empty()) {
      auto [work, bytes] = std::move(work_.front());
      work_.pop_front();
      work();
      held_bytes_ -= bytes;
    }
  });
}

DeferWeightGradients::DeferWeightGradients(WeightGradStore& store) : previous_(current_store) {
  current_store = &store;
}

DeferWeightGradients::~DeferWeightGradients() { current_store = previous_; }

WeightGradStore* current_weight_grad_store() { return current_store; }

Variable record_split(const char* name, Tensor result, const std::vector<Variable>& inputs,
                      BackwardFn input_backward, BackwardFn weight_backward, int64_t weight_bytes,
                      BackwardFn joint_backward) {
  if (!any_requires_grad(inputs)) return Variable(std::move(result));
  return attach(std::move(result),
                std::make_shared<SplitFunctionNode>(name, std::move(input_backward),
                                                    std::move(weight_backward), weight_bytes,
                                                    std::move(joint_backward)),
                inputs);
}

}  // namespace tessera
