// Ranks that must agree, checked: every rank states the settings that shape its collective
// sequence and its result (flags, model parameter names and shapes, dataset size, world layout),
// and a difference ends every rank with the same message, naming the first setting that differs
// and its value on each rank:
//
//   ranks disagree on "batch_size": 64 on ranks 0, 2, 3; 32 on rank 1
//
// instead of training silently to a wrong result or, once the collective sequences diverge,
// failing somewhere later. One all-gather of the lengths and one of the text, at start-up.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "dist/process_group.h"

namespace tessera {
namespace dist {

using Settings = std::vector<std::pair<std::string, std::string>>;

// Collective. Throws on every rank alike when any rank's settings differ from another's (a
// different value, or a setting some rank lacks).
void verify_same_settings(const Settings& settings, ProcessGroup& group);

}  // namespace dist
}  // namespace tessera
