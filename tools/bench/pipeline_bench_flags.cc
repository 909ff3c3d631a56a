#include "tools/bench/pipeline_bench_flags.h"

#include <algorithm>

#include "tools/bench/bench_flags.h"

namespace tessera {
namespace bench {
namespace {

// The value after `flag`, or nullptr: also for an empty one, which is then an unknown flag.
const char* nonempty_value(const char* arg, const char* flag) {
  const char* v = flag_value(arg, flag);
  return v && *v ? v : nullptr;
}

}  // namespace

bool parse_pipeline_bench_flags(int argc, char** argv, bool report, PipelineBenchFlags* flags) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v;
    if ((v = nonempty_value(argv[i], "--width="))) {
      flags->width = std::stoll(v);
    } else if ((v = nonempty_value(argv[i], "--batch="))) {
      flags->batch = std::stoll(v);
    } else if ((v = nonempty_value(argv[i], "--layers="))) {
      flags->layers = std::stoi(v);
    } else if ((v = nonempty_value(argv[i], "--steps="))) {
      flags->steps = std::max(1, std::stoi(v));
    } else if ((v = nonempty_value(argv[i], "--microbatches="))) {
      flags->microbatches = v;
    } else if ((v = nonempty_value(argv[i], "--schedules="))) {
      flags->schedules = v;
    } else if ((v = nonempty_value(argv[i], "--balance="))) {
      flags->balance = v;
    } else if (a == "--breakdown") {
      flags->breakdown = true;
    } else if (a == "--messages") {
      flags->messages = true;
    } else if ((v = nonempty_value(argv[i], "--sizes="))) {
      flags->message_options.sizes = v;
    } else if ((v = nonempty_value(argv[i], "--batches="))) {
      flags->message_options.batches = std::max(1, std::stoi(v));
    } else {
      if (report) {
        print_unknown_flag("pipeline_bench", argv[i],
                           "--width=N --layers=N --batch=N --steps=N --microbatches=1,2,4 "
                           "--schedules=gpipe,1f1b,interleaved; --messages "
                           "--sizes=4096,65536 --batches=N");
      }
      return false;
    }
  }
  return true;
}

}  // namespace bench
}  // namespace tessera
