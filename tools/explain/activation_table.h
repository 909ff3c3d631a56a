// explain memory's second table for a GPT: activation bytes per layer on one rank, tessera's
// formula (cost/activation_memory.h) predicted beside the counting allocator's measurement
// (activation_measure.h) and Korthikanti et al.'s 16-bit figure for the blocks.
#pragma once

#include <memory>

#include "cost/sequence_layout.h"
#include "dist/process_group.h"
#include "tools/explain/model_flags.h"

namespace tessera {
namespace explain {

// One rank of `layout`: measures on this process (a forward of the model at the choice's batch)
// when the layout is one rank, on the ranks of `world` when it has the layout's T x C (every
// rank calls; rank 0 prints), and otherwise prints the prediction alone. Prints the table, or
// with `json` one object per layer.
void print_activations(ModelChoice& choice, const cost::SequenceLayout& layout, bool json,
                       const std::shared_ptr<dist::ProcessGroup>& world);

}  // namespace explain
}  // namespace tessera
