// The benchmarks' command lines: --name=value flags matched by their prefix, comma-separated
// lists, whole numbers and lists of them, and the one message every bench gives for a flag it
// does not know. Each bench keeps its own flags struct and parser (its defaults and limits are
// its own); these are the pieces they all parse with.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
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

namespace detail {

// `item` (all of `text`, the value of `flag`, or one of its comma-separated items) as a whole
// number of at least `min`, else the message below.
template <typename T>
bool parse_item(const char* bench, const char* flag, const std::string& text,
                const std::string& item, T min, T* out) {
  auto fail = [&](const std::string& why) {
    if (bench != nullptr) {
      std::fprintf(stderr, "%s: %s%s: %s\n", bench, flag, text.c_str(), why.c_str());
    }
    return false;
  };
  char* end = nullptr;
  errno = 0;
  const long long v = item.empty() ? 0 : std::strtoll(item.c_str(), &end, 10);
  if (item.empty() || *end != '\0') return fail("'" + item + "' is not a whole number");
  if (errno == ERANGE || v < static_cast<long long>(std::numeric_limits<T>::min()) ||
      v > static_cast<long long>(std::numeric_limits<T>::max())) {
    return fail(item + " is out of range");
  }
  if (v < static_cast<long long>(min)) {
    return fail(item + " is below the least allowed, " + std::to_string(min));
  }
  *out = static_cast<T>(v);
  return true;
}

}  // namespace detail

// `text`, the value of `flag` (say "--steps="), as a whole number of at least `min`. Anything
// else (empty, "x", "2.5", "4k", below `min`, past T's range) prints "<bench>: <flag><text>: "
// and what was wrong on stderr, and returns false (the bench then exits with status 2). A null
// `bench` prints nothing: the ranks of a multi-process bench other than rank 0.
template <typename T>
bool parse_number(const char* bench, const char* flag, const std::string& text, T min, T* out) {
  return detail::parse_item(bench, flag, text, text, min, out);
}

// "1,2,4" -> {1, 2, 4}, each item checked as parse_number checks a value (an empty one too).
template <typename T>
bool parse_numbers(const char* bench, const char* flag, const std::string& text, T min,
                   std::vector<T>* out) {
  std::vector<T> numbers;
  for (const std::string& item : split_commas(text)) {
    T n;
    if (!detail::parse_item(bench, flag, text, item, min, &n)) return false;
    numbers.push_back(n);
  }
  *out = std::move(numbers);
  return true;
}

// "<bench>: unknown flag <arg> (<usage>)" on stderr; the bench then exits with status 2.
inline void print_unknown_flag(const char* bench, const char* arg, const char* usage) {
  std::fprintf(stderr, "%s: unknown flag %s (%s)\n", bench, arg, usage);
}

}  // namespace bench
}  // namespace tessera
