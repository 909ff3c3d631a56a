// Node: one backward function in the autograd graph.
//
// A differentiable op that records a graph creates a Node holding what its backward needs
// (saved Variables for parameters, so data re-gathered by ZeRO-3 is what backward sees) and
// edges to the nodes that produced its inputs. apply() maps the gradients of the op's outputs
// to the gradients of its inputs, one per next edge. Nodes are numbered as they are created;
// the engine prefers later nodes among those ready, which walks the graph back to front.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "autograd/variable.h"
#include "tensor/tensor.h"

namespace tessera {

struct Edge {
  std::shared_ptr<Node> node;  // null: that input needs no gradient
  uint32_t input_nr = 0;       // which output of `node` the gradient belongs to
  bool valid() const { return node != nullptr; }
};

class Node : public std::enable_shared_from_this<Node> {
 public:
  explicit Node(uint32_t num_outputs = 1);
  virtual ~Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  virtual std::string name() const = 0;
  // grads[i] is the gradient of forward output i (undefined means zero). Returns one gradient
  // per next edge (undefined for edges that need none).
  virtual std::vector<Tensor> apply(std::vector<Tensor>&& grads) = 0;
  // Frees saved state once backward is done with it (unless retain_graph).
  virtual void release_saved() { released_ = true; }

  const std::vector<Edge>& next_edges() const { return next_edges_; }
  void set_next_edges(std::vector<Edge> edges) { next_edges_ = std::move(edges); }
  uint64_t sequence_nr() const { return sequence_nr_; }
  uint32_t num_outputs() const { return num_outputs_; }

  int add_pre_hook(uint32_t output_nr, PreBackwardHook hook);
  bool remove_pre_hook(int handle);
  void run_pre_hooks(std::vector<Tensor>& grads);

 protected:
  // Call at the top of apply() in nodes that save state.
  void check_not_released() const;

 private:
  std::vector<Edge> next_edges_;
  uint64_t sequence_nr_;
  uint32_t num_outputs_;
  bool released_ = false;
  std::vector<std::pair<uint32_t, std::pair<int, PreBackwardHook>>> pre_hooks_;
};

// The gradient edge for an input Variable: its grad_fn, its grad accumulator, or none.
Edge gradient_edge(const Variable& v);
// Allocates hook handles, unique per process.
int next_hook_handle();

// Accumulates gradients into a leaf's grad and fires its hooks.
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(Variable leaf) : Node(1), leaf_(std::move(leaf)) {}
  std::string name() const override { return "AccumulateGrad"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  void release_saved() override {}  // the leaf outlives any one backward
  const Variable& leaf() const { return leaf_; }

 private:
  Variable leaf_;
};

}  // namespace tessera
