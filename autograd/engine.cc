#include "autograd/engine.h"

#include <queue>
#include <unordered_map>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "autograd/weight_grad.h"
#include "tensor/ops.h"

namespace tessera {

namespace {

// The start of every backward: hands the roots' gradients to the roots' edges.
class GraphRoot final : public Node {
 public:
  GraphRoot(std::vector<Edge> edges, std::vector<Tensor> grads) : Node(0), grads_(std::move(grads)) {
    set_next_edges(std::move(edges));
  }
  std::string name() const override { return "GraphRoot"; }
  std::vector<Tensor> apply(std::vector<Tensor>&&) override { return grads_; }

 private:
  std::vector<Tensor> grads_;
};

struct LaterFirst {
  bool operator()(const Node* a, const Node* b) const { return a->sequence_nr() < b->sequence_nr(); }
};

// Post-backward callbacks of the outermost backward running on this thread. A backward run
// from inside another (activation checkpointing re-running a segment) is part of it, so its
// hooks' callbacks wait for the outermost one to finish.
thread_local int backward_depth = 0;
thread_local std::vector<std::function<void()>> callback_queue;

// Marks one backward on this thread; the outermost one runs the queue at its end.
class CallbackScope {
 public:
  CallbackScope() { ++backward_depth; }
  ~CallbackScope() {
    // Leaving the outermost backward by an exception drops what it queued.
    if (--backward_depth == 0) callback_queue.clear();
  }
  CallbackScope(const CallbackScope&) = delete;
  CallbackScope& operator=(const CallbackScope&) = delete;

  // For the outermost backward: runs the queue front to back; a callback may queue another.
  void run() {
    if (backward_depth != 1) return;
    if (WeightGradStore* store = current_weight_grad_store()) {
      // B of a split backward: the weights' gradients come later; so do the callbacks.
      store->hold_callbacks(std::move(callback_queue));
      callback_queue.clear();
      return;
    }
    for (size_t i = 0; i < callback_queue.size(); ++i) {
      std::function<void()> callback = std::move(callback_queue[i]);
      callback();
    }
  }
};

// Sums the gradients that reach one input. In place when the slot's memory is its own (no other
// tensor or view holds it: a function that passes a gradient through, as AddBackward does,
// hands the same storage to two slots), dense (SumBackward's expanded view gives every element
// one address) and the sum keeps its shape and dtype, as PyTorch's InputBuffer does: a fresh
// tensor costs a pass of writes to cold memory, which was most of the time of these sums in
// ResNet-50's backward (each block's input takes two).
void accumulate(Tensor& slot, Tensor grad) {
  if (!slot.defined()) {
    slot = std::move(grad);
  } else if (slot.storage().use_count() == 1 &&
             (slot.is_contiguous() || slot.is_channels_last() || slot.is_channels_blocked()) &&
             slot.shape() == grad.shape() &&
             slot.dtype() == grad.dtype() && slot.device() == grad.device()) {
    add_(slot, grad);
  } else {
    slot = add(slot, grad);
  }
}

// The rows gradients (an embedding's) that reached `node`, added where they cost least. A leaf
// whose only gradient of this backward is one such takes it straight into its .grad
// (AccumulateGrad::add_rows); otherwise the first dense gradient of the slot, or the rows made
// dense when there is none, is the sum, and the rows are added into it in place when it is the
// slot's own memory in their compute type (the tied lm_head's gradient of wte, say), so no
// [V, C] tensor is zero-filled and then added for them.
void add_rows(Node& node, std::vector<Tensor>& slots, std::vector<std::vector<RowsGradient>>& rows) {
  for (size_t k = 0; k < rows.size(); ++k) {
    Tensor& slot = slots[k];
    if (!slot.defined() && rows[k].size() == 1) {
      auto* leaf = dynamic_cast<AccumulateGrad*>(&node);
      if (leaf != nullptr && leaf->add_rows(rows[k][0])) continue;
    }
    for (const RowsGradient& r : rows[k]) {
      if (!slot.defined()) {
        slot = r.dense();
      } else if (slot.storage().use_count() == 1 && embedding_rows_addable(slot, r.grad_out) &&
                 slot.dtype() == r.dtype && slot.shape() == Shape{r.num_rows, r.grad_out.size(-1)}) {
        embedding_backward_add_(slot, r.grad_out, r.indices);
      } else {
        accumulate(slot, r.dense());
      }
    }
  }
}

}  // namespace

void backward(const std::vector<Variable>& roots, const std::vector<Tensor>& grads,
              bool retain_graph) {
  TS_CHECK(grads.empty() || grads.size() == roots.size(), "backward: ", roots.size(),
           " roots but ", grads.size(), " gradients");
  std::vector<Edge> edges;
  std::vector<Tensor> root_grads;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Variable& root = roots[i];
    TS_CHECK(root.defined(), "backward: root ", i, " is undefined");
    TS_CHECK(root.requires_grad(), "backward: root ", i, " (shape ", root.shape(),
             ") does not require grad and has no grad_fn: nothing to differentiate");
    Tensor g;
    if (!grads.empty() && grads[i].defined()) {
      g = grads[i];
      TS_CHECK(g.shape() == root.shape(), "backward: gradient shape ", g.shape(),
               " differs from root shape ", root.shape());
    } else {
      TS_CHECK(root.numel() == 1, "backward: a gradient can be implied only for one-element "
               "outputs, but root ", i, " has shape ", root.shape());
      g = ones(root.shape(), root.data().options());
    }
    edges.push_back(gradient_edge(root));
    root_grads.push_back(g);
  }
  auto graph_root = std::make_shared<GraphRoot>(std::move(edges), std::move(root_grads));

  // Count, for every reachable node, how many gradients it will receive.
  std::unordered_map<Node*, int> dependencies;
  {
    std::vector<Node*> stack{graph_root.get()};
    std::unordered_map<Node*, bool> seen{{graph_root.get(), true}};
    while (!stack.empty()) {
      Node* node = stack.back();
      stack.pop_back();
      for (const Edge& e : node->next_edges()) {
        if (!e.valid()) continue;
        ++dependencies[e.node.get()];
        if (!seen[e.node.get()]) {
          seen[e.node.get()] = true;
          stack.push_back(e.node.get());
        }
      }
    }
  }

  // Backward itself never records a graph (gradients are plain tensors).
  NoGradGuard no_grad;
  CallbackScope callbacks;
  std::unordered_map<Node*, std::vector<Tensor>> inputs;
  std::unordered_map<Node*, std::vector<std::vector<RowsGradient>>> rows_inputs;
  std::priority_queue<Node*, std::vector<Node*>, LaterFirst> ready;
  ready.push(graph_root.get());
  while (!ready.empty()) {
    Node* node = ready.top();
    ready.pop();
    std::vector<Tensor> node_grads = std::move(inputs[node]);
    inputs.erase(node);
    node_grads.resize(node->num_outputs());
    if (auto it = rows_inputs.find(node); it != rows_inputs.end()) {
      add_rows(*node, node_grads, it->second);
      rows_inputs.erase(it);
    }
    node->run_pre_hooks(node_grads);
    bool any = node->num_outputs() == 0;
    for (const Tensor& g : node_grads) any = any || g.defined();
    std::vector<Tensor> outputs;
    if (any) outputs = node->apply(std::move(node_grads));
    // A node that got no gradient keeps what it saved: a split backward's W may still reach it
    // (the cast between a weight and the layer that deferred its gradient).
    if (!retain_graph && any) node->release_saved();
    const std::vector<Edge>& next = node->next_edges();
    for (size_t i = 0; i < next.size(); ++i) {
      const Edge& e = next[i];
      if (!e.valid()) continue;
      Node* target = e.node.get();
      if (i < outputs.size() && outputs[i].defined()) {
        std::vector<Tensor>& slots = inputs[target];
        slots.resize(target->num_outputs());
        accumulate(slots[e.input_nr], std::move(outputs[i]));
      } else if (any) {
        if (std::optional<RowsGradient> r = node->take_rows_gradient(i)) {
          std::vector<std::vector<RowsGradient>>& lists = rows_inputs[target];
          lists.resize(target->num_outputs());
          lists[e.input_nr].push_back(std::move(*r));
        }
      }
      if (--dependencies[target] == 0) ready.push(target);
    }
  }
  callbacks.run();
}

void run_as_backward(const std::function<void()>& body) {
  NoGradGuard no_grad;
  CallbackScope callbacks;
  body();
  callbacks.run();
}

void queue_callback(std::function<void()> callback) {
  TS_CHECK(backward_depth > 0, "queue_callback: called outside backward(); post-backward "
           "callbacks are queued from a hook or node while a backward runs");
  TS_CHECK(callback != nullptr, "queue_callback: empty callback");
  callback_queue.push_back(std::move(callback));
}

bool in_backward() { return backward_depth > 0; }

}  // namespace tessera
