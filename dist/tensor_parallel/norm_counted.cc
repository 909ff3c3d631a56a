#include "dist/tensor_parallel/norm_counted.h"

#include <algorithm>

#include "dist/tensor_parallel/column_parallel_linear.h"
#include "dist/tensor_parallel/row_parallel_linear.h"
#include "dist/tensor_parallel/vocab_parallel_embedding.h"

namespace tessera {
namespace dist {
namespace tensor_parallel {

std::vector<Variable> norm_counted_parameters(const std::vector<Variable>& params,
                                              nn::Module& model, int tp_rank) {
  std::vector<const VariableImpl*> slices;
  for (const auto& [name, m] : model.named_modules()) {
    if (auto* column = dynamic_cast<ColumnParallelLinear*>(m)) {
      slices.push_back(column->weight().impl());
      if (column->bias().defined()) slices.push_back(column->bias().impl());
    } else if (auto* row = dynamic_cast<RowParallelLinear*>(m)) {
      slices.push_back(row->weight().impl());  // its bias is whole on every rank
    } else if (auto* wte = dynamic_cast<VocabParallelEmbedding*>(m)) {
      slices.push_back(wte->weight().impl());
    }
  }
  std::vector<Variable> counted;
  for (const Variable& p : params) {
    const bool slice = std::find(slices.begin(), slices.end(), p.impl()) != slices.end();
    if (slice || tp_rank == 0) counted.push_back(p);
  }
  return counted;
}

}  // namespace tensor_parallel
}  // namespace dist
}  // namespace tessera
