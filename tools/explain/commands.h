// explain's subcommands, one file each; each reads its flags, prints a table (or --json lines),
// writes --plot=FILE.svg if asked, and returns the exit status. --help prints its usage.
#pragma once

#include "tools/explain/flags.h"

namespace tessera {
namespace explain {

int pipeline_command(Flags& flags);  // pipeline_command.cc: schedule grids
int memory_command(Flags& flags);    // memory_command.cc: model-state bytes per rank
int memory_measure_command(Flags& flags);  // memory_measure_command.cc: --measure, per rank
int comm_command(Flags& flags);      // comm_command.cc: bytes per step per collective
int scaling_command(Flags& flags);   // scaling_command.cc: step time and efficiency per N
int ddp_command(Flags& flags);       // ddp_command.cc: a traced DDP step's timeline and overlap
int zero3_command(Flags& flags);     // zero3_command.cc: a traced ZeRO-3 step's unit flow
int step_command(Flags& flags);      // step_command.cc: any strategy's traced step
int ring_command(Flags& flags);      // ring_command.cc: the ring all-reduce's steps
int curves_command(Flags& flags);    // curves_command.cc: training curves of --metrics files
int profile_command(Flags& flags);   // profile_command.cc: per-layer times, to be stored
int report_command(Flags& flags);    // report_command.cc: a run's HTML page

}  // namespace explain
}  // namespace tessera
