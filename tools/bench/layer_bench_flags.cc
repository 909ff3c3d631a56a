#include "tools/bench/layer_bench_flags.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "tools/bench/bench_clock.h"
#include "tools/bench/bench_flags.h"

namespace tessera {
namespace bench {
namespace {

// "1,2" -> {1, 2}. Each number is read with atoi up to the next comma, so "1,,2" gives a 0 and
// a trailing comma nothing, as the published command lines were parsed.
std::vector<int> parse_list(const char* s) {
  std::vector<int> out;
  for (const char* p = s; *p;) {
    out.push_back(std::atoi(p));
    while (*p && *p != ',') ++p;
    if (*p == ',') ++p;
  }
  return out;
}

}  // namespace

bool parse_layer_bench_flags(int argc, char** argv, LayerBenchFlags* flags) {
  for (int i = 1; i < argc; ++i) {
    const char* v;
    if ((v = flag_value(argv[i], "--model="))) flags->model = v;
    else if ((v = flag_value(argv[i], "--only="))) flags->only = v;
    else if (parse_clock_flag(argv[i])) continue;
    else if ((v = flag_value(argv[i], "--batch="))) flags->batch = std::atoll(v);
    else if ((v = flag_value(argv[i], "--reps="))) flags->reps = std::max(1, std::atoi(v));
    else if ((v = flag_value(argv[i], "--threads="))) flags->threads = parse_list(v);
    else {
      print_unknown_flag("layer_bench", argv[i],
                         "--model=resnet18|resnet50 --batch=N --threads=1,2 --reps=N "
                         "--only=substring --clock=cpu");
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
