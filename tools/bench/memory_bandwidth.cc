#include "tools/bench/memory_bandwidth.h"

#include <algorithm>
#include <cstdlib>
#include <memory>

#include "tools/bench/bench_clock.h"

namespace tessera {
namespace bench {

namespace {
typedef float v16 __attribute__((vector_size(64)));

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
}  // namespace

double triad_gbytes_per_s(int64_t bytes_per_array) {
  const int64_t n = bytes_per_array / static_cast<int64_t>(sizeof(v16));
  const size_t bytes = static_cast<size_t>(n) * sizeof(v16);
  std::unique_ptr<v16[], FreeDeleter> a(static_cast<v16*>(std::aligned_alloc(64, bytes))),
      b(static_cast<v16*>(std::aligned_alloc(64, bytes))),
      c(static_cast<v16*>(std::aligned_alloc(64, bytes)));
  for (int64_t i = 0; i < n; ++i) {  // touches every page before the timed runs
    a[i] = v16{} + 1.0f;
    b[i] = v16{} + 2.0f;
    c[i] = v16{};
  }
  const v16 s = v16{} + 0.5f;
  double best_ms = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    const double t0 = now_ms();
    for (int64_t i = 0; i < n; ++i) c[i] = a[i] + s * b[i];
    asm volatile("" : : "r"(c.get()) : "memory");  // the stores are the result
    best_ms = std::min(best_ms, now_ms() - t0);
  }
  return 3.0 * static_cast<double>(bytes) / best_ms * 1e-6;
}

}  // namespace bench
}  // namespace tessera
