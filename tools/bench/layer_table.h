// layer_bench's report: a row per layer shape and, per thread count, its median ms, GFLOP/s
// (convolutions; "-" for the memory-bound rows) and ms x count, what the shape costs in one
// step, so the table read from its largest entries down is the order to optimize in. Then the
// sums, and the step's GFLOP over all rows' time beside the measured FMA peak.
#pragma once

#include <vector>

#include "tools/bench/layer_rows.h"
#include "tools/bench/layer_bench_flags.h"

namespace tessera {
namespace bench {

// The lines above the table: the run's settings (then the thread counts and, once measured, the
// peak; print_peak ends the line print_settings leaves open).
void print_settings(const LayerBenchFlags& flags);
void print_peak(double peak_gflops);

// ms[i][j]: row i's median milliseconds at flags.threads[j].
void print_layer_table(const std::vector<Row>& rows, const std::vector<std::vector<double>>& ms,
                       const std::vector<int>& threads, double peak_gflops);

}  // namespace bench
}  // namespace tessera
