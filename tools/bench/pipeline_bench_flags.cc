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
  const char* bench = report ? "pipeline_bench" : nullptr;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v;
    if ((v = nonempty_value(argv[i], "--width="))) {
      if (!parse_number(bench, "--width=", v, int64_t{1}, &flags->width)) return false;
    } else if ((v = nonempty_value(argv[i], "--batch="))) {
      if (!parse_number(bench, "--batch=", v, int64_t{1}, &flags->batch)) return false;
    } else if ((v = nonempty_value(argv[i], "--layers="))) {
      if (!parse_number(bench, "--layers=", v, 1, &flags->layers)) return false;
    } else if ((v = nonempty_value(argv[i], "--steps="))) {
      if (!parse_number(bench, "--steps=", v, 1, &flags->steps)) return false;
    } else if ((v = nonempty_value(argv[i], "--microbatches="))) {
      if (!parse_numbers(bench, "--microbatches=", v, 1, &flags->microbatches)) return false;
    } else if ((v = nonempty_value(argv[i], "--schedules="))) {
      flags->schedules = v;
    } else if ((v = nonempty_value(argv[i], "--balance="))) {
      flags->balance = v;
    } else if (a == "--breakdown") {
      flags->breakdown = true;
    } else if (a == "--messages") {
      flags->messages = true;
    } else if ((v = nonempty_value(argv[i], "--sizes="))) {
      if (!parse_numbers(bench, "--sizes=", v, int64_t{1}, &flags->message_options.sizes)) {
        return false;
      }
    } else if ((v = nonempty_value(argv[i], "--batches="))) {
      if (!parse_number(bench, "--batches=", v, 1, &flags->message_options.batches)) return false;
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
