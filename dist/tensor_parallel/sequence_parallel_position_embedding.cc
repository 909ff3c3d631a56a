#include "dist/tensor_parallel/sequence_parallel_position_embedding.h"

#include "autograd/functions.h"
#include "dist/tensor_parallel/sequence_parallel_region.h"
#include "tensor/check.h"

namespace tessera {
namespace dist {
namespace tensor_parallel {

SequenceParallelPositionEmbedding::SequenceParallelPositionEmbedding(
    const nn::Embedding& full, std::shared_ptr<ProcessGroup> group)
    : group_(std::move(group)) {
  TS_CHECK(group_ != nullptr, "SequenceParallelPositionEmbedding: the tensor-parallel group is null");
  weight_ = register_parameter("weight", full.weight().data(), full.weight().requires_grad());
}

std::string SequenceParallelPositionEmbedding::extra_repr() const {
  return detail::str(weight_.size(0), ", ", weight_.size(1), ", sequence_parallel=true");
}

Variable SequenceParallelPositionEmbedding::forward(const Variable& positions) {
  const char* op = "SequenceParallelPositionEmbedding";
  TS_CHECK(positions.defined() && positions.dim() == 1 && positions.dtype() == kI64, op,
           ": expected positions [S] (i64), got ",
           positions.defined() ? detail::str(positions.dtype(), " ", positions.shape())
                               : std::string("undefined"));
  sequence_shard_length(positions.size(0), group_->size(), op);
  const Variable rows = embedding(weight_, positions.data());  // [S, C]
  return scatter_to_sequence_parallel_region(unsqueeze(rows, 0), group_);
}

}  // namespace tensor_parallel
}  // namespace dist
}  // namespace tessera
