// explain memory's second table for a GPT: activation bytes per layer on one rank, tessera's
// formula (cost/activation_memory.h) predicted beside the counting allocator's measurement
// (activation_measure.h) and Korthikanti et al.'s 16-bit figure for the blocks.
#pragma once

#include "tools/explain/model_flags.h"

namespace tessera {
namespace explain {

// Measures on this process (a forward of the model at the choice's batch) and prints the table,
// or with `json` one object per layer.
void print_activations(ModelChoice& choice, bool json);

}  // namespace explain
}  // namespace tessera
