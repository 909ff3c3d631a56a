// The benchmarks' command lines: --name=value flags matched by their prefix, comma-separated
// lists, and the one message every bench gives for a flag it does not know. Each bench keeps its
// own flags struct and parser (its defaults and limits are its own); these are the pieces they
// all parse with.
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace tessera {
namespace bench {

// The text after `flag` (say "--model=") when `arg` starts with it, else nullptr. The value may
// be empty ("--model="): a bench that wants one checks.
inline const char* flag_value(const char* arg, const char* flag) {
  const size_t n = std::strlen(flag);
  return std::strncmp(arg, flag, n) == 0 ? arg + n : nullptr;
}

// "a,b,c" -> {"a", "b", "c"}. Empty items stay ("a,,b", "" -> {""}), for the caller to reject.
inline std::vector<std::string> split_commas(const std::string& list) {
  std::vector<std::string> out;
  for (size_t at = 0; at <= list.size();) {
    const size_t comma = std::min(list.find(',', at), list.size());
    out.push_back(list.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

// "<bench>: unknown flag <arg> (<usage>)" on stderr; the bench then exits with status 2.
inline void print_unknown_flag(const char* bench, const char* arg, const char* usage) {
  std::fprintf(stderr, "%s: unknown flag %s (%s)\n", bench, arg, usage);
}

}  // namespace bench
}  // namespace tessera
