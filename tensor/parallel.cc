#include "tensor/parallel.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <cstdlib>
#include <string>
#include <thread>

#include "tensor/check.h"

namespace tessera {

namespace {

int initial_threads() {
  for (const char* name : {"TESSERA_NUM_THREADS", "OMP_NUM_THREADS"}) {
    if (const char* value = std::getenv(name)) {
      char* end = nullptr;
      const long n = std::strtol(value, &end, 10);
      TS_CHECK(end != value && *end == '\0' && n >= 1, "$", name, "='", value,
               "' is not a positive thread count");
      return static_cast<int>(n);
    }
  }
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

std::atomic<int>& threads_setting() {
  static std::atomic<int> n{initial_threads()};
  return n;
}

}  // namespace

int num_threads() { return threads_setting().load(std::memory_order_relaxed); }

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int threads = num_threads();
  // Inside a parallel region already (a kernel called from a kernel): run serially.
  if (threads <= 1 || n <= grain || omp_in_parallel()) {
    fn(0, n);
    return;
  }
  const int64_t chunks = std::min<int64_t>((n + grain - 1) / grain, threads);
  const int64_t per = (n + chunks - 1) / chunks;
  // Exceptions must not escape an OpenMP region; the first one is carried out and rethrown.
  std::exception_ptr error;
#pragma omp parallel for num_threads(static_cast<int>(chunks)) schedule(static, 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = c * per;
    const int64_t end = std::min(begin + per, n);
    if (begin >= end) continue;
    try {
      fn(begin, end);
    } catch (...) {
#pragma omp critical(tessera_parallel_for_error)
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

void set_num_threads(int n) {
  TS_CHECK(n >= 1, "set_num_threads: expected a positive thread count, got ", n);
  threads_setting().store(n);
  omp_set_num_threads(n);
}

}  // namespace tessera
