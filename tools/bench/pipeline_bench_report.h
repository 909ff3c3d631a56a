// pipeline_bench's table (rank 0): per (schedule, M), the formula (K-1)/(vM+K-1) beside the
// measured idle fractions, the timing model's three plays of the step, the part of the
// bottleneck's idle that the replay leaves unexplained (in % of the formula), and the step's
// length; medians over the timed steps. --breakdown adds lines below each row.
#pragma once

#include <string>
#include <vector>

#include "tools/bench/pipeline_bench_flags.h"
#include "tools/bench/pipeline_bench_steps.h"

namespace tessera {
namespace bench {

// The title line and the two header lines, for K stages.
void print_bubble_header(const PipelineBenchFlags& flags, int K);

// One row. stage_idle: every stage's median idle (gather_stage_idle); series: rank 0's.
void print_bubble_row(const std::string& schedule, int M, int v,
                      const std::vector<double>& stage_idle, const StepSeries& series);

// --breakdown: each stage's idle, the last step's stage times and message costs, the backward
// jitter, the latency of messages a stage waited for, and each stage's last step by kind of
// span (compute, recv, send, and the rest: between spans and after its list ended).
void print_breakdown(const std::vector<double>& stage_idle, const StepSeries& series);

}  // namespace bench
}  // namespace tessera
