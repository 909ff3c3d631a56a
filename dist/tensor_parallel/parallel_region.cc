#include "dist/tensor_parallel/parallel_region.h"

#include "autograd/custom_op.h"
#include "dist/tensor_parallel/slices.h"
#include "dist/trace_recorder.h"
#include "tensor/check.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {
namespace tensor_parallel {

namespace {

int64_t normalize_dim(int64_t dim, int64_t rank, const char* op) {
  const int64_t d = dim < 0 ? dim + rank : dim;
  TS_CHECK(d >= 0 && d < rank, op, ": dim ", dim, " is out of range for a tensor of ", rank,
           " dimensions");
  return d;
}

// The lengths along `dim` of every rank's slice. One rank's length does not determine the others'
// (7 over 2 ranks is 4 + 3, 6 is 3 + 3), so the ranks exchange them: one all-gather of T
// integers.
std::vector<int64_t> gathered_lengths(int64_t local_length, ProcessGroup& group) {
  Tensor mine = scalar_tensor(static_cast<double>(local_length), kI64).reshape({1});
  Tensor all = empty({group.size()}, kI64);
  trace::LabelIfRecording label("tp all_gather slice lengths", "all_gather");
  group.all_gather(mine, all)->wait();
  return all.to_vector<int64_t>();
}

}  // namespace

Tensor all_reduce_sum(const Tensor& x, ProcessGroup& group) {
  Tensor y = x.clone();
  group.all_reduce(y, ReduceOp::kSum)->wait();
  return y;
}

Tensor all_gather_along(const Tensor& local, int64_t dim, const std::vector<int64_t>& lengths,
                        ProcessGroup& group) {
  const int64_t d = normalize_dim(dim, local.dim(), "all_gather_along");
  TS_CHECK(static_cast<int>(lengths.size()) == group.size(), "all_gather_along: ",
           lengths.size(), " lengths for a group of ", group.size());
  TS_CHECK(local.size(d) == lengths[group.rank()], "all_gather_along: rank ", group.rank(),
           " holds ", local.size(d), " entries along dim ", d, " but its slice has ",
           lengths[group.rank()]);
  // Every rank holds the same lengths, so every rank raises this alike (no rank left waiting in
  // the all-gather).
  for (size_t r = 0; r < lengths.size(); ++r) {
    TS_CHECK(lengths[r] > 0, "all_gather_along: rank ", r, " holds an empty slice along dim ", d,
             " (lengths ", lengths, ")");
  }
  // Bring `dim` to the front so that each rank's slice is one contiguous run, gather the runs
  // in rank order, and move the dimension back.
  const Tensor front = local.transpose(0, d).contiguous();
  const int64_t inner = front.numel() / local.size(d);
  Shape out_shape = front.shape();
  int64_t total = 0;
  std::vector<int64_t> counts;
  for (int64_t n : lengths) {
    total += n;
    counts.push_back(n * inner);
  }
  out_shape[0] = total;
  Tensor gathered = empty(out_shape, TensorOptions(local.dtype()).device(local.device()));
  group.all_gather(front.reshape({-1}), gathered.reshape({-1}), counts)->wait();
  return gathered.transpose(0, d).contiguous();
}

Tensor reduce_scatter_along(const Tensor& full, int64_t dim, const std::vector<int64_t>& lengths,
                            ProcessGroup& group) {
  const int64_t d = normalize_dim(dim, full.dim(), "reduce_scatter_along");
  TS_CHECK(static_cast<int>(lengths.size()) == group.size(), "reduce_scatter_along: ",
           lengths.size(), " lengths for a group of ", group.size());
  int64_t total = 0;
  for (int64_t n : lengths) total += n;
  TS_CHECK(full.size(d) == total, "reduce_scatter_along: the tensor holds ", full.size(d),
           " entries along dim ", d, " but the slices (", lengths, ") add up to ", total);
  // As all_gather_along: `dim` to the front, so that rank r's slice is the r-th contiguous run.
  const Tensor front = full.transpose(0, d).contiguous();
  const int64_t inner = total > 0 ? front.numel() / total : 0;
  std::vector<int64_t> counts;
  for (int64_t n : lengths) counts.push_back(n * inner);
  Shape out_shape = front.shape();
  out_shape[0] = lengths[group.rank()];
  Tensor mine = empty(out_shape, TensorOptions(full.dtype()).device(full.device()));
  group.reduce_scatter(front.reshape({-1}), mine.reshape({-1}), counts, ReduceOp::kSum)->wait();
  return mine.transpose(0, d).contiguous();
}

Tensor local_slice(const Tensor& full, int64_t dim, ProcessGroup& group, const char* what) {
  const int64_t d = normalize_dim(dim, full.dim(), what);
  const Slice s = slice_of(full.size(d), group.size(), group.rank(), what);
  // clone, not contiguous(): a slice of leading rows is already contiguous, and contiguous()
  // would return a view that keeps the whole tensor's storage alive.
  return full.narrow(d, s.start, s.length).clone();
}

Tensor all_gather_chunks(const Tensor& local, int64_t dim, int64_t chunks,
                         const std::vector<int64_t>& lengths, ProcessGroup& group) {
  if (chunks == 1) return all_gather_along(local, dim, lengths, group);
  const int64_t d = normalize_dim(dim, local.dim(), "all_gather_chunks");
  std::vector<int64_t> per_rank;  // rank r sends its slice of every chunk
  for (int64_t n : lengths) per_rank.push_back(chunks * n);
  const Tensor gathered = all_gather_along(local, d, per_rank, group);
  // Rank r's run starts after the lower ranks' runs; chunk k is its k-th slice in it.
  std::vector<int64_t> run_start(lengths.size(), 0);
  for (size_t r = 1; r < lengths.size(); ++r) run_start[r] = run_start[r - 1] + per_rank[r - 1];
  std::vector<Tensor> pieces;
  for (int64_t k = 0; k < chunks; ++k) {
    for (size_t r = 0; r < lengths.size(); ++r) {
      pieces.push_back(gathered.narrow(d, run_start[r] + k * lengths[r], lengths[r]));
    }
  }
  return cat(pieces, d);
}

Tensor local_chunk_slices(const Tensor& full, int64_t dim, int64_t chunks, ProcessGroup& group,
                          const char* what) {
  if (chunks == 1) return local_slice(full, dim, group, what);
  const int64_t d = normalize_dim(dim, full.dim(), what);
  TS_CHECK(chunks >= 1 && full.size(d) % chunks == 0, what, ": ", full.size(d),
           " features are not ", chunks, " equal chunks");
  const int64_t chunk = full.size(d) / chunks;
  std::vector<Tensor> pieces;
  for (int64_t k = 0; k < chunks; ++k) {
    pieces.push_back(local_slice(full.narrow(d, k * chunk, chunk), d, group, what));
  }
  return cat(pieces, d);
}

Variable copy_to_parallel_region(const Variable& x, const std::shared_ptr<ProcessGroup>& group) {
  return record("CopyToParallelRegionBackward", x.data(), {x}, [group](const Tensor& g) -> Grads {
    trace::LabelIfRecording label("tp all_reduce f (backward)", "all_reduce");
    return {all_reduce_sum(g, *group)};
  });
}

Variable reduce_from_parallel_region(const Variable& x,
                                     const std::shared_ptr<ProcessGroup>& group) {
  trace::LabelIfRecording label("tp all_reduce g (forward)", "all_reduce");
  return record("ReduceFromParallelRegionBackward", all_reduce_sum(x.data(), *group), {x},
                [](const Tensor& g) -> Grads { return {g}; });
}

Variable scatter_to_parallel_region(const Variable& x, int64_t dim,
                                    const std::shared_ptr<ProcessGroup>& group) {
  const int64_t d = normalize_dim(dim, x.dim(), "scatter_to_parallel_region");
  const std::vector<int64_t> lengths =
      slice_lengths(x.size(d), group->size(), "scatter_to_parallel_region");
  return record("ScatterToParallelRegionBackward",
                local_slice(x.data(), d, *group, "scatter_to_parallel_region"), {x},
                [group, d, lengths](const Tensor& g) -> Grads {
                  trace::LabelIfRecording label("tp all_gather scatter (backward)", "all_gather");
                  return {all_gather_along(g, d, lengths, *group)};
                });
}

Variable gather_from_parallel_region(const Variable& x, int64_t dim,
                                     const std::shared_ptr<ProcessGroup>& group) {
  const int64_t d = normalize_dim(dim, x.dim(), "gather_from_parallel_region");
  const std::vector<int64_t> lengths = gathered_lengths(x.size(d), *group);
  // This rank's part of the gathered dimension: after the lower ranks' slices, whatever their
  // lengths (not necessarily balanced ones).
  int64_t start = 0;
  for (int r = 0; r < group->rank(); ++r) start += lengths[r];
  const int64_t length = lengths[group->rank()];
  trace::LabelIfRecording label("tp all_gather gather (forward)", "all_gather");
  return record("GatherFromParallelRegionBackward", all_gather_along(x.data(), d, lengths, *group),
                {x}, [d, start, length](const Tensor& g) -> Grads {
                  return {g.narrow(d, start, length).contiguous()};
                });
}

}  // namespace tensor_parallel
}  // namespace dist
}  // namespace tessera
