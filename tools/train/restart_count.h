// Under the elastic launcher (tools/launch): which attempt this run is. The launcher sets
// TESSERA_RESTART_COUNT (0 on the first attempt, k on the k-th restart; torchrun's
// TORCHELASTIC_RESTART_COUNT); the final JSON reports it as "restarts", and --inject-fault
// fires only on the first attempt, so a restarted run can finish.
#pragma once

#include <optional>

namespace tessera {
namespace train {

// None when the variable is unset or empty (not under the launcher); throws naming the value
// when it is not a count >= 0.
std::optional<int> restart_count();

}  // namespace train
}  // namespace tessera
