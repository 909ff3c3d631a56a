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
#include <optional>
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

// A gradient given by its nonzero rows: an embedding's weight gradient, grad_out's rows
// [N, C] added to rows indices[N] of a [num_rows, C] tensor in `dtype` (the weight's).
struct RowsGradient {
  Tensor grad_out, indices;
  int64_t num_rows = 0;
  DType dtype = kF32;
  Tensor dense() const;  // the [num_rows, C] tensor, zero-filled but for the rows
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
  // Output i given as rows (an embedding's weight gradient): apply() left it undefined and this
  // hands it over, once. The engine adds the rows into the sum of that input's other gradients,
  // or straight into a leaf's .grad, so the [V, C] gradient is not zero-filled just to hold them.
  virtual std::optional<RowsGradient> take_rows_gradient(size_t /*output*/) { return std::nullopt; }

  const std::vector<Edge>& next_edges() const { return next_edges_; }
  void set_next_edges(std::vector<Edge> edges) { next_edges_ = std::move(edges); }
  uint64_t sequence_nr() const { return sequence_nr_; }
  uint32_t num_outputs() const { return num_outputs_; }

  int add_pre_hook(uint32_t output_nr, PreBackwardHook hook);
  bool remove_pre_hook(int handle);
  void run_pre_hooks(std::vector<Tensor>& grads);
  bool has_pre_hooks() const { return !pre_hooks_.empty(); }

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
  // `rows` as the leaf's only gradient of this backward: added into its .grad in place and its
  // hooks fired, as apply() would for the dense gradient. False, having done nothing, where
  // apply() must see a dense one: no .grad yet, another dtype or layout, hooks that read the
  // gradient, or a split backward deferring this leaf.
  bool add_rows(const RowsGradient& rows);

 private:
  Variable leaf_;
};

}  // namespace tessera
