#include "dist/context_parallel/gather_sequence.h"

#include <vector>

#include "tensor/check.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {
namespace context_parallel {

Tensor gather_sequence(const Tensor& local, int64_t dim, ProcessGroup& group, SequenceSplit split) {
  TS_CHECK(dim >= 0 && dim < local.dim(), "gather_sequence: dim ", dim, " of a tensor of shape ",
           local.shape());
  const int ranks = group.size();
  if (ranks == 1) return local;
  const int64_t rows = local.size(dim), seq_len = rows * ranks;
  // [C, ...local's shape] in rank order.
  Shape gathered_shape{ranks};
  for (int64_t d = 0; d < local.dim(); ++d) gathered_shape.push_back(local.size(d));
  const Tensor mine = local.contiguous();
  Tensor gathered = empty(gathered_shape, mine.options());
  group.all_gather(mine.view({mine.numel()}), gathered.view({gathered.numel()}))->wait();
  // Rank by rank along dim: row j of that order sits at position order[j].
  std::vector<Tensor> parts;
  std::vector<int64_t> order;
  for (int r = 0; r < ranks; ++r) {
    parts.push_back(gathered.select(0, r));
    for (const int64_t p : rank_positions(seq_len, r, ranks, split).expand()) order.push_back(p);
  }
  std::vector<int64_t> source(seq_len);  // the row of that order holding position p
  for (int64_t j = 0; j < seq_len; ++j) source[order[j]] = j;
  const Tensor index =
      from_vector<int64_t>(source, {seq_len}).to(TensorOptions(kI64).device(local.device()));
  return index_select(cat(parts, dim), dim, index);
}

}  // namespace context_parallel
}  // namespace dist
}  // namespace tessera
