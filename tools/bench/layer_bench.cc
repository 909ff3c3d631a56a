// Per-layer breakdown of an ImageNet-style ResNet training step (issue 15): where the time of
// `train_bench --models=resnet18` (or resnet50) goes, layer shape by layer shape.
//
//   bazel run -c opt --config=native //tools/bench:layer_bench -- --model=resnet50 [--batch=8
//       --threads=1,2 --reps=5 --only=conv --clock=cpu]
//
// The model's layers are listed from its architecture (resnet_layer_shapes.h), each distinct
// shape once with the number of times the model runs it. Every convolution shape is timed in its
// three passes (forward, backward-data = input gradient, backward-weight), the rest (batch norm,
// batch norm fused with the ReLU and the residual add that follow it, max pooling, the SGD
// update of all parameters) as the step runs them (layer_rows.h), each at every thread count:
// median milliseconds of `reps` runs after a warm-up. The "x count" column is what the shape
// costs in one step, so the table read from its largest entries down is the order to optimize
// in (layer_table.h). GFLOP/s stand beside the machine's peak, measured here by a loop of
// independent FMAs on 16-float vectors (fma_peak.h). Last, a floor on the one-thread step:
// the convolution rows' time plus the least traffic of the others at one core's bandwidth,
// measured by a triad in the last-level cache and in DRAM (memory_bandwidth.h).
#include <functional>
#include <vector>

#include "tensor/parallel.h"
#include "tools/bench/bench_clock.h"
#include "tools/bench/fma_peak.h"
#include "tools/bench/layer_bench_flags.h"
#include "tools/bench/layer_rows.h"
#include "tools/bench/layer_table.h"
#include "tools/bench/median.h"
#include "tools/bench/memory_bandwidth.h"
#include "tools/bench/resnet_layer_shapes.h"

using namespace tessera;

namespace {

double median_ms(int reps, const std::function<void()>& fn) {
  fn();  // warm-up: allocator, caches, primitives
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    const double t0 = bench::now_ms();
    fn();
    ms.push_back(bench::now_ms() - t0);
  }
  return bench::upper_median(ms);
}

// ms[i][j]: row i's median at threads[j]. Thread count by thread count, so each count's rows
// run back to back with the pool at that size.
std::vector<std::vector<double>> time_rows(const std::vector<bench::Row>& rows,
                                           const std::vector<int>& threads, int reps) {
  std::vector<std::vector<double>> ms(rows.size());
  for (int t : threads) {
    set_num_threads(t);
    for (size_t i = 0; i < rows.size(); ++i) ms[i].push_back(median_ms(reps, rows[i].fn));
  }
  return ms;
}

}  // namespace

int main(int argc, char** argv) {
  bench::LayerBenchFlags flags;
  if (!bench::parse_layer_bench_flags(argc, argv, &flags)) return 2;
  const bench::Layers layers = bench::resnet_layers(flags.model == "resnet18" ? 18 : 50);
  bench::print_settings(flags);
  // The peak is one core's, and the rows' inputs are made on one thread too.
  set_num_threads(1);
  const double peak = bench::fma_peak_gflops();
  bench::print_peak(peak);
  std::vector<bench::Row> rows = bench::layer_rows(layers, flags.model, flags.batch, flags.format);
  bench::keep_rows_named(flags.only, &rows);
  const std::vector<std::vector<double>> ms = time_rows(rows, flags.threads, flags.reps);
  bench::print_layer_table(rows, ms, flags.threads, peak);
  constexpr int64_t kMiB = int64_t{1} << 20;
  bench::print_floor(rows, ms, flags.threads, peak,
                     {{bench::triad_gbytes_per_s(4 * kMiB), "4 MiB arrays, in cache"},
                      {bench::triad_gbytes_per_s(256 * kMiB), "256 MiB arrays, DRAM"}});
  return 0;
}
