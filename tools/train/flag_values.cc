#include "tools/train/flag_values.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "tensor/check.h"
#include "tools/train/closest_name.h"

namespace tessera {
namespace train {

void bad(const std::string& message) { throw FlagError(message); }

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

double to_double(const std::string& flag, const std::string& v, double min, double max) {
  char* end = nullptr;
  errno = 0;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(x) || !(x >= min) ||
      !(x <= max)) {
    bad("--" + flag + " expects a finite number >= " + exact(min) +
        (std::isfinite(max) ? " and <= " + exact(max) : std::string()) + ", got '" + v + "'");
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
  bad("--" + flag + " must be one of " + list + ", got '" + v + "'" + did_you_mean(v, choices, ""));
}

bool to_bool(const std::string& flag, const std::string& v) {
  if (v == "1" || v == "true" || v == "on") return true;
  if (v == "0" || v == "false" || v == "off") return false;
  bad("--" + flag + " expects true or false, got '" + v + "'");
}

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

std::string exact(double x) {
  // The fewest digits that read back as x: 0.9, not 0.90000000000000002 (17 always do).
  char text[32];
  for (int digits = 15; digits <= 17; ++digits) {
    std::snprintf(text, sizeof text, "%.*g", digits, x);
    if (std::strtod(text, nullptr) == x) break;
  }
  return text;
}

FlagValue number(double Config::*field, double min, double max) {
  return {"X",
          [=](Config& c, const std::string& flag, const std::string& v) {
            c.*field = to_double(flag, v, min, max);
          },
          detail::shows(field)};
}

FlagValue positive(double Config::*field) {
  return {"X",
          [=](Config& c, const std::string& flag, const std::string& v) {
            c.*field = to_double(flag, v, 0);
            if (c.*field == 0) bad("--" + flag + " must be positive, got '" + v + "'");
          },
          detail::shows(field)};
}

FlagValue choice(std::string Config::*field, std::vector<std::string> choices) {
  std::string form;
  for (const std::string& c : choices) form += (form.empty() ? "" : "|") + c;
  return {form,
          [=](Config& c, const std::string& flag, const std::string& v) {
            c.*field = one_of(flag, v, choices);
          },
          detail::shows(field)};
}

FlagValue text(std::string Config::*field, std::string form) {
  return {std::move(form),
          [=](Config& c, const std::string&, const std::string& v) { c.*field = v; },
          detail::shows(field)};
}

FlagValue path(std::string Config::*field, std::string form, std::string what) {
  return {std::move(form),
          [=](Config& c, const std::string& flag, const std::string& v) {
            if (v.empty()) bad("--" + flag + " needs " + what + ", got an empty value");
            c.*field = v;
          },
          detail::shows(field)};
}

FlagValue parsed(std::string Config::*field, std::string form,
                 std::function<void(const std::string&)> parse) {
  return {std::move(form),
          [=](Config& c, const std::string& flag, const std::string& v) {
            try {
              parse(v);
            } catch (const Error& e) {
              // Some parsers name the flag themselves ("--trace-steps=0: ...").
              const bool named = e.message().rfind("--" + flag, 0) == 0;
              bad(named ? e.message() : "--" + flag + ": " + e.message());
            }
            c.*field = v;
          },
          detail::shows(field)};
}

}  // namespace train
}  // namespace tessera
