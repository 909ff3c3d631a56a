// Reading one flag's value: numbers in range, one of a list, booleans, the pipeline balance.
// Each exits 2 with a message naming the flag and the value when the value is wrong.
#pragma once

#include <climits>
#include <cstdint>
#include <string>
#include <vector>

namespace tessera {
namespace train {

// A bad flag: says what and exits 2.
[[noreturn]] void bad(const std::string& message);
// An integer in [min, max] (max: the field's type's largest, so nothing wraps around).
int64_t to_int(const std::string& flag, const std::string& v, int64_t min,
               int64_t max = INT64_MAX);
int to_int32(const std::string& flag, const std::string& v, int min);
// A finite number >= min (inf, nan and overflowing values are errors).
double to_double(const std::string& flag, const std::string& v, double min);
std::string one_of(const std::string& flag, const std::string& v,
                   const std::vector<std::string>& choices);
bool to_bool(const std::string& flag, const std::string& v);
// "uniform", "params", "time", or layer counts "3,4,3" (each >= 1).
std::string to_balance(const std::string& v);

}  // namespace train
}  // namespace tessera
