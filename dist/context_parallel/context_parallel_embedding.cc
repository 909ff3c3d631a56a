#include "dist/context_parallel/context_parallel_embedding.h"

#include "autograd/functions.h"
#include "tensor/check.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {
namespace context_parallel {

ContextParallelEmbedding::ContextParallelEmbedding(const nn::Module& embedding,
                                                   std::shared_ptr<ProcessGroup> group,
                                                   SequenceSplit split)
    : group_(std::move(group)), split_(split) {
  TS_CHECK(group_ != nullptr, "ContextParallelEmbedding: the context-parallel group is null");
  for (const auto& [name, module] : embedding.named_children()) register_module(name, module);
  child("wte");
  // wpe is an nn::Embedding, or under sequence parallelism a SequenceParallelPositionEmbedding
  // (it takes the positions and keeps this rank's share of them): either holds the context's
  // rows as its "weight".
  const Variable* rows = nullptr;
  for (const auto& [name, p] : child("wpe").named_parameters()) {
    if (name == "weight") rows = &p;
  }
  TS_CHECK(rows != nullptr && rows->dim() == 2,
           "ContextParallelEmbedding: the embedding's wpe is a ", child("wpe").type_name(),
           " without a 2-D 'weight' of the context's rows (positions x features)");
  context_ = rows->size(0);
}

nn::Module& ContextParallelEmbedding::child(const char* name) const {
  for (const auto& [child_name, module] : named_children()) {
    if (child_name == name) return *module;
  }
  TS_FAIL("ContextParallelEmbedding: the embedding has no child named '", name, "'");
}

std::string ContextParallelEmbedding::extra_repr() const {
  return detail::str("context=", context_, ", ranks=", group_->size(),
                     ", split=", split_name(split_));
}

Variable ContextParallelEmbedding::forward(const Variable& idx) {
  TS_CHECK(idx.dim() == 2, "GPT: expected this rank's token ids [B, T/C], got shape ", idx.shape());
  const int ranks = group_->size();
  const int64_t seq_len = idx.size(1) * ranks;
  TS_CHECK(seq_len <= context_, "GPT: a sequence of ", seq_len, " tokens (", idx.size(1),
           " on each of ", ranks, " context-parallel ranks); the context is ", context_,
           " (positions 0..", context_ - 1, ")");
  const AttentionPositions positions = rank_positions(seq_len, group_->rank(), ranks, split_);
  const Tensor rows = from_vector<int64_t>(positions.expand(), {idx.size(1)})
                          .to(TensorOptions(kI64).device(idx.data().device()));
  return add(child("wte")(idx), child("wpe")(Variable(rows)));
}

}  // namespace context_parallel
}  // namespace dist
}  // namespace tessera
