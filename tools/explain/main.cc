// explain: teaching views printed without training anything.
//
//   bazel run //tools:explain -- pipeline --stages=4 --micro-batches=8 --schedule=1f1b
//   bazel run //tools:explain -- pipeline --stages=2 --micro-batches=4 --schedule=interleaved --chunks=2
//
// pipeline: the schedule's grid (stages down, time slots across), each stage's peak number of
// micro-batches in flight, and the bubble beside (K-1)/(vM+K-1), from pipeline/validator.h.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "pipeline/schedule_grid.h"
#include "tensor/check.h"

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: explain pipeline --stages=K --micro-batches=M "
               "[--schedule=gpipe|1f1b|interleaved] [--chunks=v]\n");
  return 2;
}

// "--name=123" -> 123 into *out; false when the flag is another one.
bool int_flag(const char* arg, const char* name, int* out) {
  const size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0 || arg[n] != '=') return false;
  char* end = nullptr;
  const long v = std::strtol(arg + n + 1, &end, 10);
  TS_CHECK(*end == '\0' && arg[n + 1] != '\0', name, ": expected a number, got '", arg + n + 1, "'");
  *out = static_cast<int>(v);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) != "pipeline") return usage();
  int stages = 4, microbatches = 8, chunks = 0;  // 0: 2 for interleaved, else 1
  std::string schedule = "1f1b";
  try {
    for (int i = 2; i < argc; ++i) {
      if (int_flag(argv[i], "--stages", &stages) || int_flag(argv[i], "--micro-batches", &microbatches) ||
          int_flag(argv[i], "--chunks", &chunks)) {
        continue;
      }
      if (std::strncmp(argv[i], "--schedule=", 11) == 0) {
        schedule = argv[i] + 11;
        continue;
      }
      std::fprintf(stderr, "unknown argument '%s'\n", argv[i]);
      return usage();
    }
    const auto kind = tessera::pipeline::parse_schedule(schedule);
    if (chunks == 0) chunks = kind == tessera::pipeline::ScheduleKind::kInterleaved ? 2 : 1;
    std::fputs(tessera::pipeline::explain(kind, stages, microbatches, chunks).c_str(), stdout);
  } catch (const tessera::Error& e) {
    std::fprintf(stderr, "explain: %s\n", e.message().c_str());
    return 1;
  }
  return 0;
}
