#include "tools/bench/layer_bench_flags.h"

#include <cstdint>
#include <cstdio>
#include <string>

#include "tools/bench/bench_clock.h"
#include "tools/bench/bench_flags.h"

namespace tessera {
namespace bench {

bool parse_layer_bench_flags(int argc, char** argv, LayerBenchFlags* flags) {
  for (int i = 1; i < argc; ++i) {
    const char* v;
    if ((v = flag_value(argv[i], "--model="))) {
      flags->model = v;
    } else if ((v = flag_value(argv[i], "--only="))) {
      flags->only = v;
    } else if (std::string(argv[i]) == "--channels-last") {
      flags->format = MemoryFormat::kChannelsLast;
    } else if (std::string(argv[i]) == "--channels-blocked") {
      flags->format = MemoryFormat::kChannelsBlocked;
    } else if (parse_clock_flag(argv[i])) {  // it set bench::cpu_clock
    } else if ((v = flag_value(argv[i], "--batch="))) {
      if (!parse_number("layer_bench", "--batch=", v, int64_t{1}, &flags->batch)) return false;
    } else if ((v = flag_value(argv[i], "--reps="))) {
      if (!parse_number("layer_bench", "--reps=", v, 1, &flags->reps)) return false;
    } else if ((v = flag_value(argv[i], "--threads="))) {
      if (!parse_numbers("layer_bench", "--threads=", v, 1, &flags->threads)) return false;
    } else {
      print_unknown_flag("layer_bench", argv[i],
                         "--model=resnet18|resnet50 --batch=N --threads=1,2 --reps=N "
                         "--only=substring --channels-last|--channels-blocked --clock=cpu");
      return false;
    }
  }
  if (flags->model != "resnet18" && flags->model != "resnet50") {
    std::fprintf(stderr, "layer_bench: --model must be resnet18 or resnet50, got %s\n",
                 flags->model.c_str());
    return false;
  }
  return true;
}

}  // namespace bench
}  // namespace tessera
