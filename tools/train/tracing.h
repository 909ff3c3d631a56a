// --trace=FILE and --trace-steps: the train tool only chooses; the library records.
//
// start_tracing() turns the process's recorder (dist/trace_recorder.h) on for the selected
// steps; the loop marks each step (begin_step / end_step); DDP, ZeRO, the pipeline and the
// communication threads record while a selected step runs. write_trace() gathers every rank's
// events and rank 0 writes one Chrome trace (dist/trace_file.h).
#pragma once

#include <cstdint>

#include "tools/train/context.h"

namespace tessera {
namespace train {

// Before the first step: on when --trace is given. Throws naming --trace-steps when the steps
// it selects are not all among this run's first_step..last_step (last_step 0: unknown, batches
// assigned as the run goes).
void start_tracing(const Config& c, int64_t first_step, int64_t last_step);
// The loop, around each optimizer step (1-based, counted over the whole run).
void begin_traced_step(int64_t step);
void end_traced_step();
// Collective, after training: rank 0 writes --trace, and says so when `announce` (not when the
// trace is only --report's, in a temporary file).
void write_trace(const RunContext& run, bool announce);

}  // namespace train
}  // namespace tessera
