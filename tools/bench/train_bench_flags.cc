#include "tools/bench/train_bench_flags.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "tools/bench/bench_clock.h"
#include "tools/bench/bench_flags.h"

namespace tessera {
namespace bench {
namespace {

constexpr const char* kUsage =
    "--models=a,b --steps=N --threads=N --amp=off,bf16,fp16 --param-dtype=f32|bf16|f16 "
    "--channels-last|--channels-blocked --clock=cpu --batch=B --seq-len=T (the GPTs)";

bool parse_param_dtype(const std::string& d, DType* dtype) {
  if (d != "f32" && d != "bf16" && d != "f16") {
    std::fprintf(stderr, "train_bench: --param-dtype takes f32, bf16 or f16, got '%s'\n",
                 d.c_str());
    return false;
  }
  *dtype = d == "bf16" ? kBF16 : d == "f16" ? kF16 : kF32;
  return true;
}

bool parse_amps(const std::string& list, std::vector<std::string>* amps) {
  *amps = split_commas(list);
  for (const std::string& a : *amps) {
    if (a != "off" && a != "bf16" && a != "fp16") {
      std::fprintf(stderr,
                   "train_bench: --amp takes off, bf16 or fp16 (comma-separated), got '%s'\n",
                   a.c_str());
      return false;
    }
  }
  return true;
}

}  // namespace

bool parse_train_bench_flags(int argc, char** argv, TrainBenchFlags* flags) {
  for (int i = 1; i < argc; ++i) {
    const char* v;
    if ((v = flag_value(argv[i], "--models="))) {
      flags->models = v;
    } else if ((v = flag_value(argv[i], "--threads="))) {
      if (!parse_numbers("train_bench", "--threads=", v, 1, &flags->thread_counts)) return false;
    } else if ((v = flag_value(argv[i], "--param-dtype="))) {
      if (!parse_param_dtype(v, &flags->param_dtype)) return false;
    } else if (std::string(argv[i]) == "--channels-last") {
      flags->memory_format = MemoryFormat::kChannelsLast;
    } else if (std::string(argv[i]) == "--channels-blocked") {
      flags->memory_format = MemoryFormat::kChannelsBlocked;
    } else if (parse_clock_flag(argv[i])) {  // it set bench::cpu_clock
    } else if ((v = flag_value(argv[i], "--steps="))) {
      if (!parse_number("train_bench", "--steps=", v, 1, &flags->resnet_steps)) return false;
    } else if ((v = flag_value(argv[i], "--batch="))) {
      if (!parse_number("train_bench", "--batch=", v, 1, &flags->batch)) return false;
    } else if ((v = flag_value(argv[i], "--seq-len="))) {
      if (!parse_number("train_bench", "--seq-len=", v, 1, &flags->seq_len)) return false;
    } else if ((v = flag_value(argv[i], "--amp="))) {
      if (!parse_amps(v, &flags->amps)) return false;
    } else {
      print_unknown_flag("train_bench", argv[i], kUsage);
      return false;
    }
  }
  return true;
}

}  // namespace bench
}  // namespace tessera
