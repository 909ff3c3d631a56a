#include "dist/context_parallel/sequence_split.h"

#include "tensor/check.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {
namespace context_parallel {

std::string split_name(SequenceSplit split) {
  return split == SequenceSplit::kHeadTail ? "head-tail" : "contiguous";
}

SequenceSplit parse_split(const std::string& name) {
  if (name == "head-tail") return SequenceSplit::kHeadTail;
  if (name == "contiguous") return SequenceSplit::kContiguous;
  TS_FAIL("context parallelism: the sequence split '", name, "' is not head-tail or contiguous");
}

void check_sequence_length(int64_t seq_len, int ranks, const char* who) {
  TS_CHECK(ranks >= 1, who, ": the context-parallel group needs at least one rank, got ", ranks);
  TS_CHECK(seq_len > 0 && seq_len % (2 * ranks) == 0, who, ": context parallelism over ", ranks,
           " ranks cuts the sequence into 2 x ", ranks, " = ", 2 * ranks,
           " equal chunks, and a sequence of ", seq_len, " tokens does not divide by ", 2 * ranks);
}

AttentionPositions rank_positions(int64_t seq_len, int rank, int ranks, SequenceSplit split) {
  check_sequence_length(seq_len, ranks, "rank_positions");
  TS_CHECK(rank >= 0 && rank < ranks, "rank_positions: rank ", rank, " of a group of ", ranks);
  const int64_t chunk = seq_len / (2 * ranks);
  const int64_t first = split == SequenceSplit::kHeadTail ? rank : 2 * rank;
  const int64_t second = split == SequenceSplit::kHeadTail ? 2 * ranks - 1 - rank : 2 * rank + 1;
  if (second == first + 1) return AttentionPositions::contiguous(first * chunk, 2 * chunk);
  return AttentionPositions{{{first * chunk, chunk}, {second * chunk, chunk}}};
}

Tensor rank_rows(const Tensor& x, int64_t dim, int rank, int ranks, SequenceSplit split) {
  TS_CHECK(dim >= 0 && dim < x.dim(), "rank_rows: dim ", dim, " of a tensor of shape ", x.shape());
  const AttentionPositions positions = rank_positions(x.size(dim), rank, ranks, split);
  std::vector<Tensor> runs;
  for (const AttentionPositions::Run& run : positions.runs) {
    runs.push_back(x.narrow(dim, run.start, run.length));
  }
  return runs.size() == 1 ? runs[0].contiguous() : cat(runs, dim);
}

RankBatch rank_batch(const Tensor& windows, int rank, int ranks, SequenceSplit split) {
  TS_CHECK(windows.dim() == 2 && windows.size(1) >= 2,
           "rank_batch: expected token windows [B, T + 1], got shape ", windows.shape());
  const int64_t t = windows.size(1) - 1;
  return {rank_rows(windows.narrow(1, 0, t), 1, rank, ranks, split),
          rank_rows(windows.narrow(1, 1, t), 1, rank, ranks, split)};
}

}  // namespace context_parallel
}  // namespace dist
}  // namespace tessera
