// Every rank's StateDict on every rank: for state that is split over ranks by *which entries*
// each holds (a pipeline stage's optimizer state), where the keys, dtypes and shapes differ
// from rank to rank, so no fixed-size collective fits.
//
// Two variable-length all-gathers over the group (dist/gather_bytes.h):
//
//   rank 0: "state.0.exp_avg\tf32\t32,16\n..."  ─┐ all-gather of the entry lists (text)
//   rank 1: "state.4.exp_avg\tf32\t10,32\n..."  ─┘
//   rank 0: [ bytes of its tensors, in order ]  ─┐ all-gather of the tensors' bytes
//   rank 1: [ bytes of its tensors, in order ]  ─┘
//
// then every rank rebuilds each rank's entries from the two. The ledger counts both.
#pragma once

#include <vector>

#include "dist/process_group.h"
#include "tensor/state_dict.h"

namespace tessera {
namespace dist {

// Collective over `group`: the state dicts of all its ranks, in rank order, on every rank.
// Tensors come back on the CPU, each with its dtype and shape.
std::vector<StateDict> all_gather_state_dicts(const StateDict& mine, ProcessGroup& group);

}  // namespace dist
}  // namespace tessera
