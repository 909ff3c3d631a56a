// The machine's single-core f32 FMA peak in GFLOP/s, measured rather than taken from a spec
// sheet: 12 independent chains of 16-float FMAs, enough to cover the FMA latency on any current
// core. Timed with bench::now_ms, so on the clock --clock picked.
#pragma once

namespace tessera {
namespace bench {

double fma_peak_gflops();

}  // namespace bench
}  // namespace tessera
