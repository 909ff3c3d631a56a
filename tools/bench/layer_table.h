// layer_bench's report: a row per layer shape and, per thread count, its median ms, GFLOP/s
// (convolutions; "-" for the memory-bound rows) and ms x count, what the shape costs in one
// step, so the table read from its largest entries down is the order to optimize in. Then the
// sums, and the step's GFLOP over all rows' time beside the measured FMA peak. Then a floor
// on the one-thread step with these convolution kernels: their rows' time plus the least
// traffic of the memory-bound rows at the measured bandwidth.
#pragma once

#include <string>
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

// A triad bandwidth (memory_bandwidth.h) and what it measured, "4 MiB arrays" say.
struct Bandwidth {
  double gbytes_per_s;
  std::string arrays;
};

// The floor at one thread (nothing when threads has no 1): the convolution rows' time, plus the
// memory-bound rows' least traffic (Row::gbytes) at each bandwidth, and the % of the FMA peak
// a step that long would reach. It leaves out what no row times (gradient sums, the loss, the
// classifier), so a real step is slower still.
void print_floor(const std::vector<Row>& rows, const std::vector<std::vector<double>>& ms,
                 const std::vector<int>& threads, double peak_gflops,
                 const std::vector<Bandwidth>& bandwidths);

}  // namespace bench
}  // namespace tessera
