#include "dist/tensor_parallel/optimizer_state.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dist/tensor_parallel/column_parallel_linear.h"
#include "dist/tensor_parallel/parallel_region.h"
#include "dist/tensor_parallel/row_parallel_linear.h"
#include "dist/tensor_parallel/vocab_parallel_embedding.h"
#include "optim/state_keys.h"

namespace tessera {
namespace dist {
namespace tensor_parallel {

namespace {

// How a parameter is split: along `dim`, `lengths` per rank of `group` (no group: whole), in
// each of `chunks` blocks (c_attn split by heads: 3).
struct Split {
  int64_t dim = 0;
  int64_t chunks = 1;
  std::vector<int64_t> lengths;
  std::shared_ptr<ProcessGroup> group;
  Shape local_shape, full_shape;
};

// The split of each parameter of `order` (empty: model.parameters()).
std::vector<Split> splits_of(nn::Module& model, const std::vector<Variable>& order) {
  std::map<const VariableImpl*, Split> split;
  const auto add = [&](const Variable& p, int64_t dim, int64_t full, const char* what,
                       const std::shared_ptr<ProcessGroup>& group, int64_t chunks = 1) {
    if (!p.defined()) return;
    Split s{dim, chunks, slice_lengths(full / chunks, group->size(), what), group, p.shape(),
            p.shape()};
    s.full_shape[dim] = full;
    split[p.impl()] = s;
  };
  for (const auto& [name, module] : model.named_modules()) {
    if (const auto* col = dynamic_cast<ColumnParallelLinear*>(module)) {
      const char* what = "ColumnParallelLinear: output features";
      add(col->weight(), 0, col->out_features(), what, col->group(), col->chunks());
      add(col->bias(), 0, col->out_features(), what, col->group(), col->chunks());
    } else if (const auto* row = dynamic_cast<RowParallelLinear*>(module)) {
      add(row->weight(), 1, row->in_features(), "RowParallelLinear: input features", row->group());
    } else if (const auto* wte = dynamic_cast<VocabParallelEmbedding*>(module)) {
      add(wte->weight(), 0, wte->num_embeddings(), "VocabParallelEmbedding: vocabulary",
          wte->group());
    }
  }
  std::vector<Split> out;
  for (const Variable& p : order.empty() ? model.parameters() : order) {
    const auto it = split.find(p.impl());
    out.push_back(it == split.end() ? Split{} : it->second);
  }
  return out;
}

// The parameter index of "state.I.NAME" (optim/state_keys.h), or -1 for other keys.
int64_t parameter_index(const std::string& key, size_t count) {
  const std::optional<optim::StateKey> parsed = optim::parse_state_key(key, count);
  return parsed ? parsed->index : -1;
}

}  // namespace

StateDict gather_optimizer_state(const StateDict& local, nn::Module& model,
                                 const std::vector<Variable>& order) {
  const std::vector<Split> splits = splits_of(model, order);
  StateDict full;
  for (const auto& [key, t] : local) {
    const int64_t i = parameter_index(key, splits.size());
    const Split* s = i >= 0 && splits[i].group ? &splits[i] : nullptr;
    if (s != nullptr && t.shape() == s->local_shape) {
      full.set(key, all_gather_chunks(t, s->dim, s->chunks, s->lengths, *s->group));
    } else {
      full.set(key, t);
    }
  }
  return full;
}

StateDict slice_optimizer_state(const StateDict& full, nn::Module& model,
                                const std::vector<Variable>& order) {
  const std::vector<Split> splits = splits_of(model, order);
  StateDict local;
  for (const auto& [key, t] : full) {
    const int64_t i = parameter_index(key, splits.size());
    const Split* s = i >= 0 && splits[i].group ? &splits[i] : nullptr;
    if (s != nullptr && t.dim() > 0) {
      TS_CHECK(t.shape() == s->full_shape, "slice_optimizer_state: '", key, "' has shape ",
               t.shape(), " but its parameter's unsplit shape is ", s->full_shape);
      local.set(key, local_chunk_slices(t, s->dim, s->chunks, *s->group, "slice_optimizer_state"));
    } else {
      local.set(key, t);
    }
  }
  return local;
}

std::vector<bool> replicated_parameters(nn::Module& model, const std::vector<Variable>& order) {
  std::vector<bool> out;
  for (const Split& s : splits_of(model, order)) out.push_back(s.group == nullptr);
  return out;
}

}  // namespace tensor_parallel
}  // namespace dist
}  // namespace tessera
