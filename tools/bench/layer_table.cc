#include "tools/bench/layer_table.h"

#include <cstdio>

#include "tools/bench/bench_clock.h"

namespace tessera {
namespace bench {

void print_settings(const LayerBenchFlags& flags) {
  std::printf("%s, batch %lld, 224x224; median ms (%s) of %d runs; threads:", flags.model.c_str(),
              static_cast<long long>(flags.batch),
              cpu_clock ? "process CPU time" : "wall clock", flags.reps);
  for (int t : flags.threads) std::printf(" %d", t);
}

void print_peak(double peak_gflops) {
  std::printf("\nsingle-core FMA peak (16-float vectors, measured, %s): %.0f GFLOP/s\n\n",
              cpu_clock ? "CPU time" : "wall clock", peak_gflops);
}

void print_layer_table(const std::vector<Row>& rows, const std::vector<std::vector<double>>& ms,
                       const std::vector<int>& threads, double peak_gflops) {
  std::printf("%-44s %5s", "layer (batch x C x H x W input)", "count");
  for (int t : threads) std::printf(" | %2dthr ms GFLOP/s  x count", t);
  std::printf("\n");
  std::vector<double> total(threads.size(), 0), conv_total(threads.size(), 0);
  for (size_t i = 0; i < rows.size(); ++i) {
    std::printf("%-44s %5d", rows[i].name.c_str(), rows[i].count);
    for (size_t j = 0; j < threads.size(); ++j) {
      const double m = ms[i][j];
      if (rows[i].gflop > 0) {
        std::printf(" | %8.3f %7.1f %8.2f", m, rows[i].gflop / m * 1e3, m * rows[i].count);
        conv_total[j] += m * rows[i].count;
      } else {
        std::printf(" | %8.3f %7s %8.2f", m, "-", m * rows[i].count);
      }
      total[j] += m * rows[i].count;
    }
    std::printf("\n");
  }
  std::printf("%-50s", "sum of convolutions (ms per step)");
  for (double c : conv_total) std::printf(" | %26.1f", c);
  std::printf("\n%-50s", "sum of all rows (ms per step)");
  for (double c : total) std::printf(" | %26.1f", c);
  // The step's work is its convolutions' (the rest is memory-bound): against one core's peak
  // at one thread, against t cores' at t threads (issue 31's target: 70% at one thread).
  double step_gflop = 0;
  for (const Row& r : rows) step_gflop += r.gflop * r.count;
  std::printf("\n%-50s", "step GFLOP / all rows' time, % of peak");
  for (size_t j = 0; j < threads.size(); ++j) {
    const double rate = total[j] > 0 ? step_gflop / total[j] * 1e3 : 0;
    std::printf(" | %8.1f GFLOP %6.1f/s %3.0f%%", step_gflop, rate,
                100 * rate / (peak_gflops * threads[j]));
  }
  std::printf("\n");
}

void print_floor(const std::vector<Row>& rows, const std::vector<std::vector<double>>& ms,
                 const std::vector<int>& threads, double peak_gflops,
                 const std::vector<Bandwidth>& bandwidths) {
  size_t one = 0;
  while (one < threads.size() && threads[one] != 1) ++one;
  if (one == threads.size()) return;
  double conv_ms = 0, gflop = 0, gbytes = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].gflop > 0) conv_ms += ms[i][one] * rows[i].count;
    gflop += rows[i].gflop * rows[i].count;
    gbytes += rows[i].gbytes * rows[i].count;
  }
  std::printf("\nfloor at 1 thread with these convolution kernels: their rows' %.1f ms, plus the "
              "memory-bound rows' least traffic, %.2f GB a step, at one core's bandwidth:\n",
              conv_ms, gbytes);
  for (const Bandwidth& b : bandwidths) {
    const double step_ms = conv_ms + gbytes / b.gbytes_per_s * 1e3;
    std::printf("  %5.1f GB/s (triad, %s): %7.1f ms a step, %3.0f%% of peak\n", b.gbytes_per_s,
                b.arrays.c_str(), step_ms, 100 * gflop / step_ms * 1e3 / peak_gflops);
  }
}

}  // namespace bench
}  // namespace tessera
