#include "tools/bench/fma_peak.h"

#include <cstdint>

#include "tools/bench/bench_clock.h"

namespace tessera {
namespace bench {

typedef float v16 __attribute__((vector_size(64)));

double fma_peak_gflops() {
  v16 a0 = v16{} + 0.1f, a1 = a0 + 0.1f, a2 = a1 + 0.1f, a3 = a2 + 0.1f, a4 = a3 + 0.1f,
      a5 = a4 + 0.1f, a6 = a5 + 0.1f, a7 = a6 + 0.1f, a8 = a7 + 0.1f, a9 = a8 + 0.1f,
      a10 = a9 + 0.1f, a11 = a10 + 0.1f;
  const v16 m = v16{} + 0.999999f, b = v16{} + 1e-7f;
  const int64_t iters = 50'000'000;
  const double t0 = now_ms();
  for (int64_t it = 0; it < iters; ++it) {  // each line contracts to one FMA (GCC's default)
    a0 = a0 * m + b; a1 = a1 * m + b; a2 = a2 * m + b; a3 = a3 * m + b;
    a4 = a4 * m + b; a5 = a5 * m + b; a6 = a6 * m + b; a7 = a7 * m + b;
    a8 = a8 * m + b; a9 = a9 * m + b; a10 = a10 * m + b; a11 = a11 * m + b;
  }
  const v16 sum = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11;
  // Keeps the chains alive: without a use of their sum the loop would be dead code.
  asm volatile("" : : "r"(&sum) : "memory");
  return iters * 12 * 16 * 2 / (now_ms() - t0) * 1e-6;
}

}  // namespace bench
}  // namespace tessera
