// CPU threading: one setting for how many threads kernels use.
//
// Kernels parallelize with OpenMP; GEMMs go to OpenBLAS, which keeps its own thread pool and
// is told the same number. The count starts from $TESSERA_NUM_THREADS if set, else
// $OMP_NUM_THREADS, else the number of cores, and set_num_threads() changes it at run time.
#pragma once

#include <cstdint>
#include <functional>

namespace tessera {

int num_threads();
void set_num_threads(int n);

// Runs fn(begin, end) over [0, n) split into chunks of at least `grain` elements, in parallel
// when n is big enough to pay for it. fn must be safe to call concurrently on disjoint ranges.
template <typename F>
void parallel_for(int64_t n, int64_t grain, const F& fn) {
  if (n <= 0) return;
  const int threads = num_threads();
  if (threads <= 1 || n <= grain) {
    fn(int64_t{0}, n);
    return;
  }
  int64_t chunks = (n + grain - 1) / grain;
  if (chunks > threads) chunks = threads;
  const int64_t per = (n + chunks - 1) / chunks;
#pragma omp parallel for num_threads(threads) schedule(static, 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = c * per;
    const int64_t end = begin + per < n ? begin + per : n;
    if (begin < end) fn(begin, end);
  }
}

}  // namespace tessera
