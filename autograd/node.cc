#include "autograd/node.h"

#include <algorithm>

#include "autograd/weight_grad.h"
#include "tensor/ops.h"

namespace tessera {

namespace {
std::atomic<uint64_t> g_next_sequence_nr{0};
std::atomic<int> g_next_hook_handle{1};
}  // namespace

int next_hook_handle() { return g_next_hook_handle.fetch_add(1); }

Node::Node(uint32_t num_outputs)
    : sequence_nr_(g_next_sequence_nr.fetch_add(1)), num_outputs_(num_outputs) {}

int Node::add_pre_hook(uint32_t output_nr, PreBackwardHook hook) {
  TS_CHECK(output_nr < num_outputs_, "add_pre_hook: ", name(), " has ", num_outputs_,
           " outputs, no output ", output_nr);
  const int handle = next_hook_handle();
  pre_hooks_.push_back({output_nr, {handle, std::move(hook)}});
  return handle;
}

bool Node::remove_pre_hook(int handle) {
  const auto it = std::remove_if(pre_hooks_.begin(), pre_hooks_.end(),
                                 [handle](const auto& h) { return h.second.first == handle; });
  const bool found = it != pre_hooks_.end();
  pre_hooks_.erase(it, pre_hooks_.end());
  return found;
}

void Node::run_pre_hooks(std::vector<Tensor>& grads) {
  for (auto& [output_nr, hook] : pre_hooks_) {
    if (grads[output_nr].defined()) hook.second(grads[output_nr]);
  }
}

void Node::check_not_released() const {
  TS_CHECK(!released_, "backward through ", name(), " a second time: its saved tensors were "
           "freed after the first backward (pass retain_graph = true to keep them)");
}

Edge gradient_edge(const Variable& v) {
  if (!v.defined()) return {};
  if (v.grad_fn()) return {v.grad_fn(), v.output_nr()};
  if (v.requires_grad()) return {v.grad_accumulator(), 0};
  return {};
}

Tensor RowsGradient::dense() const { return embedding_backward(grad_out, indices, num_rows, dtype); }

bool AccumulateGrad::add_rows(const RowsGradient& rows) {
  VariableImpl& leaf = *leaf_.impl();
  WeightGradStore* store = current_weight_grad_store();
  if (has_pre_hooks() || !leaf.pre_hooks.empty() || (store != nullptr && store->defers(leaf_)) ||
      !leaf.grad.defined() || leaf.grad.dtype() != rows.dtype ||
      leaf.grad.shape() != Shape{rows.num_rows, rows.grad_out.size(-1)} ||
      !embedding_rows_addable(leaf.grad, rows.grad_out)) {
    return false;
  }
  embedding_backward_add_(leaf.grad, rows.grad_out, rows.indices);
  for (auto& [handle, hook] : leaf.grad_ready_hooks) hook(leaf_);
  return true;
}

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor>&& grads) {
  Tensor g = std::move(grads[0]);
  if (!g.defined()) return {};
  // B of a split backward whose store holds this leaf's gradients too: accumulated in W (no
  // store is current while W runs, so this accumulates then).
  WeightGradStore* store = current_weight_grad_store();
  if (store != nullptr && store->defers(leaf_)) {
    const int64_t bytes = static_cast<int64_t>(g.nbytes());
    store->add([leaf = leaf_, g]() mutable { AccumulateGrad(leaf).apply({std::move(g)}); }, bytes);
    return {};
  }
  VariableImpl& leaf = *leaf_.impl();
  for (auto& [handle, hook] : leaf.pre_hooks) hook(g);
  TS_CHECK(g.shape() == leaf.data.shape(), "AccumulateGrad: gradient of shape ", g.shape(),
           " for ", leaf.name.empty() ? "a leaf" : leaf.name, " of shape ", leaf.data.shape());
  if (g.dtype() != leaf.data.dtype()) g = g.to(leaf.data.dtype());
  if (!leaf.grad.defined()) {
    // Take the gradient over when nobody else holds its storage; otherwise copy it, so a later
    // in-place accumulation cannot write into a tensor another leaf also received.
    const bool exclusive = g.storage().use_count() == 1 && g.is_contiguous();
    leaf.grad = exclusive ? g : g.clone();
  } else {
    add_(leaf.grad, g);
  }
  for (auto& [handle, hook] : leaf.grad_ready_hooks) hook(leaf_);
  return {};
}

}  // namespace tessera
