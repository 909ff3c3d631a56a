#include "dist/tensor_parallel/vocab_parallel_embedding.h"

#include "autograd/functions.h"
#include "dist/tensor_parallel/parallel_region.h"
#include "dist/tensor_parallel/sequence_parallel_region.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {
namespace tensor_parallel {

namespace {
constexpr const char* kVocabulary = "VocabParallelEmbedding: vocabulary";
}  // namespace

int64_t vocab_rows_per_rank(int64_t vocab, int parts, const char* what) {
  TS_CHECK(parts >= 1, what, ": the tensor-parallel size must be at least 1, got ", parts);
  TS_CHECK(vocab >= parts && vocab % parts == 0, what, ": the vocabulary of ", vocab,
           " tokens does not divide by the tensor-parallel size T = ", parts,
           " (each rank holds V / T rows of the embedding and V / T logits; pad the vocabulary "
           "to a multiple of T, as models::padded_vocab pads it to a multiple of 64)");
  return vocab / parts;
}

VocabParallelEmbedding::VocabParallelEmbedding(const nn::Embedding& full,
                                               std::shared_ptr<ProcessGroup> group)
    : group_(std::move(group)),
      num_embeddings_(full.weight().size(0)),
      embedding_dim_(full.weight().size(1)) {
  TS_CHECK(group_ != nullptr, "VocabParallelEmbedding: the tensor-parallel group is null");
  const int64_t rows =
      vocab_rows_per_rank(num_embeddings_, group_->size(), "VocabParallelEmbedding");
  vocab_slice_ = {group_->rank() * rows, rows};
  weight_ =
      register_parameter("weight", local_slice(full.weight().data(), 0, *group_, kVocabulary));
}

std::string VocabParallelEmbedding::extra_repr() const {
  return detail::str(num_embeddings_, ", ", embedding_dim_, ", this rank's=[", vocab_slice_.start,
                     ", ", vocab_slice_.end(), ")",
                     sequence_parallel_ ? ", sequence_parallel=true" : "");
}

Variable VocabParallelEmbedding::forward(const Variable& indices) {
  const char* op = "VocabParallelEmbedding";
  TS_CHECK(indices.defined(), op, ": indices are undefined");
  TS_CHECK(!indices.requires_grad(), op, ": indices (", indices.dtype(), " ", indices.shape(),
           ") are token ids and take no gradient");
  TS_CHECK(indices.dtype() == kI64, op, ": indices must be i64 (token ids), got ",
           indices.dtype(), " with shape ", indices.shape());
  const Tensor ids = indices.data();
  if (sequence_parallel_) {
    // Checked here, before the lookup, so the error names this layer and the sequence.
    TS_CHECK(ids.dim() == 2, op, ": under sequence parallelism token ids are [B, S], got shape ",
             ids.shape());
    sequence_shard_length(ids.size(kSequenceDim), group_->size(), op);
  }
  // Checked against the whole vocabulary: the lookup below sees only this rank's rows, and would
  // take any id outside them for another rank's. Every rank holds the same ids, so every rank
  // raises this alike (none is left waiting in the all-reduce).
  if (ids.numel() > 0) {
    const int64_t lo = static_cast<int64_t>(amin(ids).item());
    const int64_t hi = static_cast<int64_t>(amax(ids).item());
    TS_CHECK(lo >= 0 && hi < num_embeddings_, op, ": token ids span [", lo, ", ", hi,
             "] but the vocabulary has ", num_embeddings_, " tokens: ids must be in [0, ",
             num_embeddings_, ")");
  }
  // Megatron's masked lookup: ids this rank does not hold read a row of its own (the nearest)
  // and are then zeroed, so their rows add nothing to the sum and, by where's backward, nothing
  // to that row's gradient.
  const Tensor local = sub(ids, static_cast<double>(vocab_slice_.start));
  const Tensor local_ids = clamp(local, 0.0, static_cast<double>(vocab_slice_.length - 1));
  const Tensor mine = eq(local, local_ids);  // [...] bool: this rank holds the token's row
  const Variable rows = embedding(weight_, local_ids);                             // [..., C]
  const Variable partial =
      where(mine.unsqueeze(-1), rows, Variable(zeros({}, rows.data().options())));
  return sequence_parallel_ ? reduce_scatter_to_sequence_parallel_region(partial, group_)
                            : reduce_from_parallel_region(partial, group_);
}

std::vector<nn::Module::StateEntry> VocabParallelEmbedding::own_state_entries() const {
  return {{"weight", {num_embeddings_, embedding_dim_}, weight_.dtype()}};
}

void VocabParallelEmbedding::save_own_state(const std::string& prefix, StateDict& out) const {
  const std::vector<int64_t> rows(group_->size(), vocab_slice_.length);
  out.set(prefix + "weight", all_gather_along(weight_.data(), 0, rows, *group_));
}

void VocabParallelEmbedding::load_own_state(const std::string& prefix, const StateDict& state) {
  if (const Tensor* w = state.find(prefix + "weight")) {
    Tensor(weight_.data()).copy_(local_slice(*w, 0, *group_, kVocabulary));
  }
}

}  // namespace tensor_parallel
}  // namespace dist
}  // namespace tessera
