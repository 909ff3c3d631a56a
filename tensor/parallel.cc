#include "tensor/parallel.h"

#include <omp.h>

#include <atomic>
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

void set_num_threads(int n) {
  TS_CHECK(n >= 1, "set_num_threads: expected a positive thread count, got ", n);
  threads_setting().store(n);
  omp_set_num_threads(n);
}

}  // namespace tessera
