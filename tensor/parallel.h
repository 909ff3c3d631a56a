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
// (The OpenMP region lives in parallel.cc, so callers need not be compiled with -fopenmp.)
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace tessera
