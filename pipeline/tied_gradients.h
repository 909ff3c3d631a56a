// The tied parameters' gradients after a batch, wherever the stage's data-parallel reduction
// left them, summed over their holders (tied_parameters.h):
//
//   no replicas, or the Pipe's        each holder's .grad() is its stage's whole (averaged)
//   data-parallel group (DDP)         gradient: summed over the holders, set back
//
//   ZeRO-1 (averages in step())       .grad() is this rank's own. Averaged over the replicas
//                                     first, in a buffer holding only the tied gradients (the
//                                     same on every holder): each stage's optimizer then
//                                     averages equal sums, which any order adds alike. (Its
//                                     own flat vector is cut differently on each stage, so
//                                     averaging the sums there could round them apart.)
//
//   ZeRO-2 (averaged in backward)     .grad() was released; the average is in the shards:
//                                     rank d of the stage's replicas holds elements
//                                     [shard_d ∩ the parameter's range]. Put back together
//                                     (each element in one shard: a sum over the replicas
//                                     assembles it), summed over the holders, and this rank's
//                                     part written back into its shard:
//
//       stage 0 flat:  [ wte ................ | h0 ............ ]
//       shards:        [ replica 0      | replica 1              ]
//       wte's average  = replica 0's part + replica 1's part (zeros elsewhere): an all-reduce
//
// Either way every holder ends with the same bits, the sum of each stage's averaged gradient.
#pragma once

#include <string>
#include <vector>

#include "dist/process_group.h"
#include "pipeline/tied_parameters.h"

namespace tessera {
namespace dist {
class ZeroRedundancyOptimizer;
}  // namespace dist
namespace pipeline {

// Point to point over `pipeline` (and, with `zero`, collective over its data-parallel group);
// every rank calls it after its batch. `zero`: the ZeRO optimizer stepping this rank's
// parameters, or null. Returns "" or, when a gradient is held where this cannot see it (a ZeRO
// optimizer not given), what to do; the exchange still takes place, so no peer is left waiting.
std::string sum_tied_gradients(const std::vector<TiedParameter>& tied, dist::ProcessGroup& pipeline,
                               dist::ZeroRedundancyOptimizer* zero);

}  // namespace pipeline
}  // namespace tessera
