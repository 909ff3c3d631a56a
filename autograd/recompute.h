// Recomputing one op's output instead of keeping it for backward (Megatron-core's
// CheckpointWithoutOutput; Korthikanti et al. 2022's "selective activation recomputation").
//
// checkpoint() (checkpoint.h) keeps a function's inputs and recomputes everything inside it,
// GEMMs included. Selective recomputation keeps the GEMMs' outputs and recomputes only what is
// cheap to recompute but costly to keep: a LayerNorm's output, GELU's, the attention core's.
// Such an output y = fn(x) is usually kept not by fn but by the op that consumes it (a Linear
// keeps its input for its weight's gradient), so recompute_output() runs
//
//   z = consumer(y),   y = fn(x) computed without a graph
//
// and then frees y's bytes: z's graph still holds y's (now empty) storage. When z's gradient
// arrives, before the consumer's backward needs y, fn runs again on x recording its graph, its
// output is copied back into y's storage, and y's own gradient later flows through that
// recomputed graph to x and to the parameters inside fn. Kept: x (usually kept anyway: the block
// input, or the GEMM output that fn reads). Saved: y, and whatever fn's own backward would have
// kept (LayerNorm's statistics, the attention op's logsumexp and its q, k, v in the heads'
// layout).
//
// fn is replayed with the random stream and the autocast settings of its first run, as
// checkpoint() does. The consumer's output must not share y's storage (an error otherwise: it
// would be freed with y). With grad mode off this is just consumer(fn(x)).
#pragma once

#include <functional>

#include "autograd/variable.h"

namespace tessera {

using UnaryFn = std::function<Variable(const Variable&)>;

Variable recompute_output(const UnaryFn& fn, const Variable& x, const UnaryFn& consumer);

}  // namespace tessera
