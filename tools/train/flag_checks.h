// The flags that only make sense together: checked once every flag is read (every rank finds
// the same), and against the world size once MPI has started (check_against_world, flags.h).
#pragma once

#include "tools/train/flags.h"

namespace tessera {
namespace train {

// Exits 2 naming the flags that do not go together.
void check_combinations(const Config& config);

}  // namespace train
}  // namespace tessera
