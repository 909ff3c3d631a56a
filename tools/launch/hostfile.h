// The slots an Open MPI hostfile offers: one line per node, "node slots=K [max_slots=L]", '#'
// comments, a node without slots=K counting 1. The elastic launcher reads it again before each
// attempt, so a node removed from it (by an operator, or a --before-restart health check) means
// fewer ranks for the next attempt.
#pragma once

#include <string>

namespace tessera {
namespace launch {

// The sum of the slots; throws naming the file and the line when it cannot be read or a slots
// value is not a count >= 0.
int hostfile_slots(const std::string& path);

}  // namespace launch
}  // namespace tessera
