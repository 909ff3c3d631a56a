#include "tools/train/flag_values.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace tessera {
namespace train {

// A bad flag: says what and exits 2.
[[noreturn]] void bad(const std::string& message) {
  std::fprintf(stderr, "train: %s\n(run with --help for the flags)\n", message.c_str());
  std::exit(2);
}

// An integer in [min, max] (max: the field's type's largest, so nothing wraps around).
int64_t to_int(const std::string& flag, const std::string& v, int64_t min, int64_t max) {
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno == ERANGE || n < min || n > max) {
    bad("--" + flag + " expects an integer >= " + std::to_string(min) +
        (max < INT64_MAX ? " and <= " + std::to_string(max) : std::string()) + ", got '" + v + "'");
  }
  return n;
}

int to_int32(const std::string& flag, const std::string& v, int min) {
  return static_cast<int>(to_int(flag, v, min, INT_MAX));
}

// A finite number >= min (inf, nan and overflowing values are errors).
double to_double(const std::string& flag, const std::string& v, double min) {
  char* end = nullptr;
  errno = 0;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(x) || !(x >= min)) {
    bad("--" + flag + " expects a finite number >= " + std::to_string(min) + ", got '" + v + "'");
  }
  return x;
}

std::string one_of(const std::string& flag, const std::string& v,
                   const std::vector<std::string>& choices) {
  for (const std::string& c : choices) {
    if (v == c) return v;
  }
  std::string list;
  for (const std::string& c : choices) list += (list.empty() ? "" : "|") + c;
  bad("--" + flag + " must be one of " + list + ", got '" + v + "'");
}

bool to_bool(const std::string& flag, const std::string& v) {
  if (v == "1" || v == "true" || v == "on") return true;
  if (v == "0" || v == "false" || v == "off") return false;
  bad("--" + flag + " expects true or false, got '" + v + "'");
}

// "uniform", "params", "time", or layer counts "3,4,3" (each >= 1).
std::string to_balance(const std::string& v) {
  if (v == "uniform" || v == "params" || v == "time") return v;
  bool ok = true;
  size_t at = 0;
  while (ok) {
    const size_t comma = v.find(',', at);
    const std::string count =
        v.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    // Digits without a leading zero: a count >= 1.
    ok = !count.empty() && count[0] != '0' &&
         count.find_first_not_of("0123456789") == std::string::npos;
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  if (!ok) {
    bad("--balance must be uniform, params, time or layer counts >= 1 such as 3,4,3, got '" + v +
        "'");
  }
  return v;
}

}  // namespace train
}  // namespace tessera
