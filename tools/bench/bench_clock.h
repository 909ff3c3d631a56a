// The benchmarks' clock: milliseconds on the wall clock, or (--clock=cpu sets cpu_clock) of CPU
// time used by the whole process. On a machine shared with other work, a one-thread run's CPU
// time leaves out the time slices the process spent waiting for a core (its caches still
// suffer), so one-thread figures taken under load stay comparable. At two threads CPU time also
// counts the threads' spinning at barriers, so it is not a step time there.
#pragma once

#include <chrono>
#include <cstring>
#include <ctime>

namespace tessera {
namespace bench {

inline bool cpu_clock = false;

// The flag that picks the clock: true (and cpu_clock set) when `arg` is --clock=cpu. The wall
// clock is the default, so there is no --clock=wall to accept.
inline bool parse_clock_flag(const char* arg) {
  if (std::strcmp(arg, "--clock=cpu") != 0) return false;
  cpu_clock = true;
  return true;
}

inline double now_ms() {
  if (!cpu_clock) {
    return std::chrono::duration<double, std::milli>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

}  // namespace bench
}  // namespace tessera
