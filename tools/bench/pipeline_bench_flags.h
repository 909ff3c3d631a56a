// pipeline_bench's command line: the model's size, the steps, which schedules and micro-batch
// counts, the balance, --breakdown, and --messages with its own sizes and batches.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tools/bench/pipeline_bench_messages.h"

namespace tessera {
namespace bench {

struct PipelineBenchFlags {
  int64_t width = 1024, batch = 2048;  // Linear(width, width) blocks on batch x width inputs
  int layers = 64, steps = 7;          // steps: timed, after one warm-up
  std::vector<int> microbatches = {1, 2, 4, 8, 16};
  std::string schedules = "gpipe,1f1b,interleaved";
  std::string balance = "uniform";     // uniform, params, time or a,b (pipeline::PipeOptions)
  bool breakdown = false;              // per stage and kind of span, below each row
  bool messages = false;               // run the message bench instead
  MessageBenchOptions message_options;
};

// Fills `flags` from argv. False for a flag it does not know (or one given an empty value) or a
// number that is not one (bench_flags.h), which `report` (rank 0) prints on stderr: every rank
// returns false, only one says why.
bool parse_pipeline_bench_flags(int argc, char** argv, bool report, PipelineBenchFlags* flags);

}  // namespace bench
}  // namespace tessera
