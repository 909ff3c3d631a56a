// Flags: "--name=value" (and bare "--name" for true) arguments of an explain subcommand, read by
// type. Every read names the flag; a value that does not parse, or is out of range, is an error
// quoting flag and value; a flag no read asked for is an error too (check_all_used), so a typo
// never passes silently.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tensor/check.h"

namespace tessera {
namespace explain {

class Flags {
 public:
  // argv[first..argc): the subcommand's arguments.
  Flags(int argc, char** argv, int first);

  bool has(const std::string& name) const;
  bool boolean(const std::string& name);  // bare --name, or --name=true|false
  std::string text(const std::string& name, const std::string& otherwise);
  std::string required(const std::string& name);
  int64_t integer(const std::string& name, int64_t otherwise, int64_t at_least);
  double number(const std::string& name, double otherwise, double at_least);
  // "1,2,4" (each at least `at_least`).
  std::vector<int64_t> integers(const std::string& name, const std::vector<int64_t>& otherwise,
                                int64_t at_least);
  std::vector<double> numbers(const std::string& name, double at_least);  // empty when not given
  std::vector<std::string> texts(const std::string& name, const std::string& otherwise);  // "a,b"
  // Throws naming the first flag that was given but never read.
  void check_all_used(const std::string& command) const;

 private:
  std::map<std::string, std::string> values_;
  std::set<std::string> used_;
  const std::string* find(const std::string& name);
};

// f(value), an error from it prefixed with "--name=value: ".
template <typename F>
auto parsed(const std::string& name, const std::string& value, F f) -> decltype(f(value)) {
  try {
    return f(value);
  } catch (const Error& e) {
    TS_CHECK(false, "--", name, "=", value, ": ", e.message());
    throw;
  }
}

}  // namespace explain
}  // namespace tessera
