// The rules that relate several flags, beside the flag table (flag_table.h) whose rows hold
// what concerns one flag alone (its values, the strategies that accept it). Checked in three
// stages, each finding the same on every rank so that all end with exit code 2 together:
//   1. check_combinations, once every flag is read and the model's defaults filled in;
//   2. check_against_world, once MPI has started and the world size is known;
//   3. the library itself, building the strategy (a pipeline that cannot cut the model as
//      asked raises FlagError: pipelined.cc), for what only the model can tell.
#pragma once

#include <string>

#include "tools/train/flags.h"

namespace tessera {
namespace train {

// Throws FlagError naming the flags that do not go together.
void check_combinations(const Config& config);
// What is wrong with the flags on `world_size` ranks, or "".
std::string check_against_world(const Config& config, int world_size);
// A warning when a strategy that shares the work between ranks runs on one (no mpirun, or
// mpirun -np 1): it then trains as one process would, which is allowed (torchrun does so with
// --nproc-per-node=1) but seldom meant. "" when there is nothing to say. `launched`: whether
// mpirun or srun started the process.
std::string one_rank_warning(const Config& config, int world_size, bool launched);

}  // namespace train
}  // namespace tessera
