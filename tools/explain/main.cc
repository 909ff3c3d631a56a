// explain: teaching views printed without training anything.
//
//   bazel run //tools:explain -- pipeline --stages=4 --micro-batches=8 --schedule=1f1b
//   bazel run //tools:explain -- pipeline --stages=2 --micro-batches=4 --schedule=interleaved --chunks=2
//   bazel run //tools:explain -- pipeline --stages=4 --micro-batches=8 --schedule=zb-h1 --backward-ratio=2
//
// pipeline: the schedule's grid (stages down, time slots across), each stage's peak number of
// micro-batches in flight (and, for zero-bubble schedules, of pending W passes), and the bubble
// beside the theory, from pipeline/validator.h. --backward-ratio=R (the whole backward over the
// forward) and --weight-ratio=R (the W part over the forward, default half the backward ratio)
// add the timing model's bubble for those times (pipeline/timing_model.h), with and without a
// flush, and ZB-H1's closed form.
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
               "[--schedule=gpipe|1f1b|interleaved|zb-h1|zb-h2] [--chunks=v] "
               "[--backward-ratio=R] [--weight-ratio=R]\n");
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

// "--name=1.5" -> 1.5 into *out; false when the flag is another one.
bool double_flag(const char* arg, const char* name, double* out) {
  const size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0 || arg[n] != '=') return false;
  char* end = nullptr;
  *out = std::strtod(arg + n + 1, &end);
  TS_CHECK(*end == '\0' && arg[n + 1] != '\0', name, ": expected a number, got '", arg + n + 1, "'");
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) != "pipeline") return usage();
  int stages = 4, microbatches = 8, chunks = 0;  // 0: 2 for interleaved, else 1
  double backward_ratio = -1, weight_ratio = -1;  // -1: not given
  std::string schedule = "1f1b";
  try {
    for (int i = 2; i < argc; ++i) {
      if (int_flag(argv[i], "--stages", &stages) || int_flag(argv[i], "--micro-batches", &microbatches) ||
          int_flag(argv[i], "--chunks", &chunks) ||
          double_flag(argv[i], "--backward-ratio", &backward_ratio) ||
          double_flag(argv[i], "--weight-ratio", &weight_ratio)) {
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
    if (backward_ratio >= 0 || weight_ratio >= 0) {
      if (backward_ratio < 0) backward_ratio = 2;
      if (weight_ratio < 0) weight_ratio = backward_ratio / 2;
      TS_CHECK(weight_ratio <= backward_ratio, "--weight-ratio=", weight_ratio,
               " is more than the whole backward, --backward-ratio=", backward_ratio);
      const tessera::pipeline::StageTimes times{1, backward_ratio, weight_ratio};
      std::fputs(tessera::pipeline::explain_timing(kind, stages, microbatches, chunks, times).c_str(),
                 stdout);
    }
  } catch (const tessera::Error& e) {
    std::fprintf(stderr, "explain: %s\n", e.message().c_str());
    return 1;
  }
  return 0;
}
