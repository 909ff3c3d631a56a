// --context-parallel=C: a GPT's sequences split over C ranks (dist::context_parallel: ring
// attention, head-tail chunks). The world is D replicas x C context-parallel ranks (x T
// tensor-parallel ranks with --tensor-parallel), laid out by dist::Topology, tensor-parallel
// ranks neighbours, then a replica's context-parallel ranks:
//
//   C = 2, D = 2:   replica 0: ranks 0 1    replica 1: ranks 2 3
//   context-parallel groups {0, 1}, {2, 3}: the same batch, each rank its chunks of every
//   sequence; the data-parallel group (gradients averaged) is all 4: the same model.
//   T = 2, C = 2:   tensor-parallel groups {0, 1}, {2, 3}; context-parallel {0, 2}, {1, 3}:
//   the ring runs over each tensor-parallel rank's heads.
//
// The tool wraps the strategy the flags choose (one process's optimizer, DDP, ZeRO-1/2, over
// the D x C ranks that hold the same slices) in a ContextParallel strategy that cuts each batch
// into this rank's chunks (inputs and targets alike) before the inner step, and reads the
// replica's shard of the data. Every rank's loss is the mean over its own tokens, as many on
// every rank, so the one-process gradient is the average over the dp x cp ranks: DDP's
// all-reduce and ZeRO's reduce-scatter over them are that average already; without them
// (--strategy=single, D = 1) the wrapper averages over the context-parallel group after
// backward. Evaluation gathers the logits of the whole sequence
// (dist::context_parallel::gather_sequence).
#pragma once

#include <memory>
#include <string>

#include "dist/context_parallel/sequence_split.h"
#include "dist/process_group.h"
#include "dist/topology.h"
#include "nn/sequential.h"
#include "tools/train/flags.h"
#include "tools/train/strategy.h"

namespace tessera {
namespace train {

// The groups of the layout above, from the grid (which every world rank builds).
struct ContextParallelLayout {
  std::shared_ptr<dist::ProcessGroup> context_parallel;  // this replica's C ranks
  std::shared_ptr<dist::ProcessGroup> replicas;          // this rank's place in every replica
  int replica_count = 1, replica = 0;
  std::string algorithm = "ring";  // --context-parallel-algorithm
};
ContextParallelLayout make_context_parallel_layout(const dist::Topology& grid,
                                                   const std::string& algorithm);

// Swaps the GPT's attention and embedding for their context-parallel versions
// (dist::context_parallel::parallelize_context, head-tail order, the layout's algorithm).
void split_sequences(nn::Sequential& model, const ContextParallelLayout& layout);

// The strategy `inner` (built over the world) with each batch cut into this rank's chunks.
std::unique_ptr<Strategy> context_parallel_strategy(const Config& config,
                                                    std::unique_ptr<Strategy> inner,
                                                    std::shared_ptr<nn::Sequential> model,
                                                    const ContextParallelLayout& layout);

}  // namespace train
}  // namespace tessera
