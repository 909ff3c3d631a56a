// VocabParallelEmbedding: Megatron-LM's embedding with its vocabulary (the rows of the table)
// split over the T ranks of a tensor-parallel group (Shoeybi et al. 2019, section 3: "we
// parallelize the input embedding weight matrix E along the vocabulary dimension").
//
//            weight [V, C]                           rank r, for token ids [B, S]
//     rows [0, V/T)          -> rank 0       e_r[i] = weight_r[id_i - rV/T]  if this rank holds id_i
//     rows [V/T, 2V/T)       -> rank 1                0                      otherwise
//     ...                                    out = g(e_r) = sum_r e_r        [B, S, C]
//
// Every token's row lives on exactly one rank, so the sum of the ranks' partial lookups is the
// whole lookup: one all-reduce of B x S x C values in forward (g = reduce_from_parallel_region);
// backward is the identity (every rank gets the same dL/dout) and each rank adds the rows of its
// own tokens into its slice's gradient, none of the others'. Per rank the table is V/T x C:
// GPT-2's wte (50304 x 768, 147 MiB in f32) is 74 MiB a rank at T = 2, and its gradient and
// AdamW's two moments shrink with it.
//
// The vocabulary must divide by T (Megatron-LM pads it to a multiple of 128 T instead): the
// GPT's is already padded to a multiple of 64, and padding it further would change the model
// with T, where the point is that a seed gives the same model whatever T is. So every rank
// holds V/T rows, the output projection tied to them (vocab_parallel_lm_head.h) gives V/T logits
// on every rank, and a vocabulary that does not divide is an error naming V and T.
//
// Sequence parallelism (set_sequence_parallel): the partial lookups are reduce-scattered along
// the sequence instead of all-reduced, so each rank gets the whole lookup of its S/T tokens
// [B, S/T, C] (ids [B, S], the same on every rank), for half the bytes of the all-reduce.
//
// Initialization takes rank r's rows of a full nn::Embedding (every rank passes the same, from
// the same seed), so the model is the same whatever T is. state_dict() holds the full table
// (an all-gather of the rows: every rank of the group must call it) and load_state_dict() takes
// this rank's rows, so checkpoints move between tensor-parallel and single-process runs.
#pragma once

#include <memory>
#include <string>

#include "dist/process_group.h"
#include "dist/tensor_parallel/slices.h"
#include "nn/embedding.h"

namespace tessera {
namespace dist {
namespace tensor_parallel {

class VocabParallelEmbedding : public nn::Module {
 public:
  // This rank's rows of `full` (every rank of `group` passes the same full table).
  VocabParallelEmbedding(const nn::Embedding& full, std::shared_ptr<ProcessGroup> group);

  std::string extra_repr() const override;
  // indices: i64 token ids of any shape, each in [0, num_embeddings()), the same on every rank
  // of the group. Returns [..., embedding_dim()], the whole lookup, on every rank (collective).
  Variable forward(const Variable& indices) override;

  int64_t num_embeddings() const { return num_embeddings_; }  // V, the whole vocabulary
  int64_t embedding_dim() const { return embedding_dim_; }
  // This rank's rows of the vocabulary: [start, start + V/T).
  Slice vocab_slice() const { return vocab_slice_; }
  const Variable& weight() const { return weight_; }  // [V/T, C]
  const std::shared_ptr<ProcessGroup>& group() const { return group_; }
  // Sequence parallelism: forward returns this rank's tokens [B, S/T, C] of ids [B, S].
  void set_sequence_parallel(bool on) { sequence_parallel_ = on; }
  bool sequence_parallel() const { return sequence_parallel_; }

 protected:
  std::vector<StateEntry> own_state_entries() const override;
  void save_own_state(const std::string& prefix, StateDict& out) const override;
  void load_own_state(const std::string& prefix, const StateDict& state) override;

 private:
  std::shared_ptr<ProcessGroup> group_;
  int64_t num_embeddings_, embedding_dim_;
  Slice vocab_slice_;
  bool sequence_parallel_ = false;
  Variable weight_;
};

// The rows each rank of a group of `parts` holds of a vocabulary of `vocab`: vocab / parts,
// or an error naming both when it does not divide.
int64_t vocab_rows_per_rank(int64_t vocab, int parts, const char* what);

}  // namespace tensor_parallel
}  // namespace dist
}  // namespace tessera
