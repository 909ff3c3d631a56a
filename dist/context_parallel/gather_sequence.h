// gather_sequence: the whole sequence from the ranks' chunks (the inverse of sequence_split.h's
// rank_rows), for what needs every position at once: the validation loss over the whole
// logits, a report. One all-gather over the context-parallel group, then the rows put back in
// position order. Collective: every rank of the group calls it with the same shapes.
#pragma once

#include "dist/context_parallel/sequence_split.h"
#include "dist/process_group.h"
#include "tensor/tensor.h"

namespace tessera {
namespace dist {
namespace context_parallel {

// local holds this rank's T/C rows along `dim` (rank_rows' order); the result holds all T, in
// position order, on every rank.
Tensor gather_sequence(const Tensor& local, int64_t dim, ProcessGroup& group, SequenceSplit split);

}  // namespace context_parallel
}  // namespace dist
}  // namespace tessera
