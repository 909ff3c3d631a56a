// Reading one flag's value: the kinds of value a flag takes (an integer in range, a finite
// number, one of a list, a boolean, a path, a string another module parses), each a FlagValue
// that writes its Config field and shows it back. The flag table (flag_table.h) pairs each flag
// with one of them. A wrong value throws FlagError naming the flag and the value.
#pragma once

#include <algorithm>
#include <climits>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "tools/train/flags.h"

namespace tessera {
namespace train {

// A bad flag: throws FlagError with the message (parse_flags prints it and exits 2).
[[noreturn]] void bad(const std::string& message);
// An integer in [min, max] (max: the field's type's largest, so nothing wraps around).
int64_t to_int(const std::string& flag, const std::string& v, int64_t min,
               int64_t max = INT64_MAX);
// A finite number >= min and <= max (inf, nan and overflowing values are errors).
double to_double(const std::string& flag, const std::string& v, double min,
                 double max = std::numeric_limits<double>::infinity());
std::string one_of(const std::string& flag, const std::string& v,
                   const std::vector<std::string>& choices);
bool to_bool(const std::string& flag, const std::string& v);
// "uniform", "params", "time", or layer counts "3,4,3" (each >= 1).
std::string to_balance(const std::string& v);
// A number as --help shows it and settings_that_must_agree compares it: the shortest text that
// reads back as the same double, so equal text means equal numbers.
std::string exact(double x);

// How a flag's text becomes its Config field, and the field's value shown back (for --help's
// default and for the settings every rank must share).
struct FlagValue {
  std::string form;  // after '=' in --help: "N", "X", "ddp|zero1|zero2", "FILE"
  std::function<void(Config& c, const std::string& flag, const std::string& v)> set;
  std::function<std::string(const Config& c)> show;
};

namespace detail {
inline std::string show(const std::string& v) { return v; }
inline std::string show(bool v) { return v ? "true" : "false"; }
inline std::string show(double v) { return exact(v); }
template <typename T>
std::string show(T v) {
  return std::to_string(v);
}
template <typename T>
std::function<std::string(const Config&)> shows(T Config::*field) {
  return [field](const Config& c) { return show(c.*field); };
}
}  // namespace detail

// An integer >= min, at most what the field holds.
template <typename T>
FlagValue integer(T Config::*field, int64_t min) {
  const int64_t max = static_cast<int64_t>(
      std::min<uint64_t>(std::numeric_limits<T>::max(), static_cast<uint64_t>(INT64_MAX)));
  return {"N",
          [=](Config& c, const std::string& flag, const std::string& v) {
            c.*field = static_cast<T>(to_int(flag, v, min, max));
          },
          detail::shows(field)};
}
// A finite number in [min, max].
FlagValue number(double Config::*field, double min,
                 double max = std::numeric_limits<double>::infinity());
// A finite number > 0 (a size, a rate or a bandwidth that 0 would make meaningless).
FlagValue positive(double Config::*field);
// One of `choices`; the error lists them.
FlagValue choice(std::string Config::*field, std::vector<std::string> choices);
// true|false (also 1|0, on|off); an int field holds 1 or 0 (-1 before the model's default).
template <typename T>
FlagValue boolean(T Config::*field) {
  return {"true|false",
          [=](Config& c, const std::string& flag, const std::string& v) {
            c.*field = to_bool(flag, v) ? 1 : 0;
          },
          detail::shows(field)};
}
// Any text, empty included.
FlagValue text(std::string Config::*field, std::string form);
// A path that must not be empty (an empty one would silently mean "none"): `what` says what
// the flag needs, "a file name".
FlagValue path(std::string Config::*field, std::string form, std::string what);
// Text another module parses: `parse` throws tessera::Error saying what is wrong.
FlagValue parsed(std::string Config::*field, std::string form,
                 std::function<void(const std::string&)> parse);

}  // namespace train
}  // namespace tessera
