// The paths the flags name, checked before anything trains: a run that would fail at its end
// writing --metrics, --trace or --save-model into a directory that does not exist, or that
// cannot make its --checkpoint-dir, or whose --resume names nothing, is told so at start (exit
// 2) instead of after its training (exit 1).
#pragma once

#include <string>

#include "tools/train/flags.h"

namespace tessera {
namespace train {

// Whether `path` names a directory.
bool is_directory(const std::string& path);

// What is wrong with the paths this rank would use (rank 0 writes the outputs; every rank
// reads --resume and writes into --checkpoint-dir), or "".
std::string output_paths_problem(const Config& config, bool lead);

}  // namespace train
}  // namespace tessera
