#include "dist/tensor_parallel/sequence_parallel.h"

#include <algorithm>

#include "dist/tensor_parallel/parallel_region.h"
#include "dist/tensor_parallel/row_parallel_linear.h"
#include "dist/trace_recorder.h"
#include "nn/layer_norm.h"
#include "tensor/check.h"

namespace tessera {
namespace dist {
namespace tensor_parallel {

std::vector<Variable> sequence_parallel_parameters(nn::Module& model) {
  std::vector<const VariableImpl*> marked;
  for (const auto& [name, m] : model.named_modules()) {
    if (auto* norm = dynamic_cast<nn::LayerNorm*>(m)) {
      if (norm->weight().defined()) marked.push_back(norm->weight().impl());
      if (norm->bias().defined()) marked.push_back(norm->bias().impl());
    } else if (auto* row = dynamic_cast<RowParallelLinear*>(m)) {
      if (row->sequence_parallel() && row->bias().defined()) marked.push_back(row->bias().impl());
    }
  }
  std::vector<Variable> out;
  for (const Variable& p : model.parameters()) {
    if (std::find(marked.begin(), marked.end(), p.impl()) != marked.end()) out.push_back(p);
  }
  return out;
}

void sum_gradients_over_sequence_parallel_group(const std::vector<Variable>& params,
                                                const std::shared_ptr<ProcessGroup>& group) {
  TS_CHECK(group != nullptr, "sum_gradients_over_sequence_parallel_group: the tensor-parallel "
           "group is null");
  for (const Variable& p : params) {
    TS_CHECK(p.defined() && p.requires_grad(), "sum_gradients_over_sequence_parallel_group: "
             "a parameter (", p.defined() ? p.name() : std::string("undefined"),
             ") that takes no gradient");
    // A pre-backward hook on a leaf runs before its gradient is accumulated (autograd/variable.h).
    p.register_hook([group](Tensor& grad) {
      trace::LabelIfRecording label("sp all_reduce sequence_parallel grads", "all_reduce");
      grad = all_reduce_sum(grad, *group);
    });
  }
}

}  // namespace tensor_parallel
}  // namespace dist
}  // namespace tessera
