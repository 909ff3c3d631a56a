// Every rank's byte string on every rank, in rank order: two all-gathers over the group, the
// lengths first (one i64 each), then the bytes with those per-rank counts. For what differs in
// size from rank to rank: the settings verify_same_settings compares, the state dicts of
// pipeline stages (state_dict_gather.h). The byte ledger counts both gathers.
#pragma once

#include <string>
#include <vector>

#include "dist/process_group.h"

namespace tessera {
namespace dist {

// Collective over `group`.
std::vector<std::string> all_gather_bytes(const std::string& mine, ProcessGroup& group);

}  // namespace dist
}  // namespace tessera
