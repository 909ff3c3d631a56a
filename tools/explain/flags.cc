#include "tools/explain/flags.h"

#include <algorithm>
#include <cstdlib>

#include "tensor/check.h"

namespace tessera {
namespace explain {

namespace {

// v: the value, or one item of the list `shown` (the flag's whole value, quoted in errors).
int64_t parse_integer(const std::string& name, const std::string& shown, const std::string& v,
                      int64_t at_least) {
  char* end = nullptr;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  TS_CHECK(!v.empty() && *end == '\0', "--", name, "=", shown, ": expected a whole number",
           shown == v ? "" : ", got '" + v + "'");
  TS_CHECK(x >= at_least, "--", name, "=", shown, ": must be at least ", at_least);
  return x;
}

double parse_number(const std::string& name, const std::string& shown, const std::string& v,
                    double at_least) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  TS_CHECK(!v.empty() && *end == '\0', "--", name, "=", shown, ": expected a number",
           shown == v ? "" : ", got '" + v + "'");
  TS_CHECK(x >= at_least, "--", name, "=", shown, ": must be at least ", at_least);
  return x;
}

std::vector<std::string> split(const std::string& v) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= v.size()) {
    const size_t comma = std::min(v.find(',', at), v.size());
    out.push_back(v.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

}  // namespace

Flags::Flags(int argc, char** argv, int first) {
  for (int i = first; i < argc; ++i) {
    const std::string arg = argv[i];
    TS_CHECK(arg.size() > 2 && arg.compare(0, 2, "--") == 0, "unexpected argument '", arg,
             "' (flags are --name=value)");
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    values_[name] = eq == std::string::npos ? "true" : arg.substr(eq + 1);
  }
}

const std::string* Flags::find(const std::string& name) {
  used_.insert(name);
  const auto it = values_.find(name);
  return it == values_.end() ? nullptr : &it->second;
}

bool Flags::has(const std::string& name) const { return values_.count(name) != 0; }

bool Flags::boolean(const std::string& name) {
  const std::string* v = find(name);
  if (v == nullptr) return false;
  TS_CHECK(*v == "true" || *v == "false", "--", name, "=", *v, ": expected true or false");
  return *v == "true";
}

std::string Flags::text(const std::string& name, const std::string& otherwise) {
  const std::string* v = find(name);
  return v == nullptr ? otherwise : *v;
}

std::string Flags::required(const std::string& name) {
  const std::string* v = find(name);
  TS_CHECK(v != nullptr && !v->empty(), "--", name, " is required");
  return *v;
}

int64_t Flags::integer(const std::string& name, int64_t otherwise, int64_t at_least) {
  const std::string* v = find(name);
  return v == nullptr ? otherwise : parse_integer(name, *v, *v, at_least);
}

double Flags::number(const std::string& name, double otherwise, double at_least) {
  const std::string* v = find(name);
  return v == nullptr ? otherwise : parse_number(name, *v, *v, at_least);
}

std::vector<int64_t> Flags::integers(const std::string& name, const std::vector<int64_t>& otherwise,
                                     int64_t at_least) {
  const std::string* v = find(name);
  if (v == nullptr) return otherwise;
  std::vector<int64_t> out;
  for (const std::string& item : split(*v)) {
    TS_CHECK(!item.empty(), "--", name, "=", *v, ": expected a list like 1,2,4");
    out.push_back(parse_integer(name, *v, item, at_least));
  }
  return out;
}

std::vector<double> Flags::numbers(const std::string& name, double at_least) {
  const std::string* v = find(name);
  std::vector<double> out;
  if (v == nullptr) return out;
  for (const std::string& item : split(*v)) {
    TS_CHECK(!item.empty(), "--", name, "=", *v, ": expected a list like 0.5,1.5,2");
    out.push_back(parse_number(name, *v, item, at_least));
  }
  return out;
}

std::vector<std::string> Flags::texts(const std::string& name, const std::string& otherwise) {
  const std::string* v = find(name);
  std::vector<std::string> out = split(v == nullptr ? otherwise : *v);
  for (const std::string& item : out) {
    TS_CHECK(!item.empty(), "--", name, "=", *v, ": an empty item in the list");
  }
  return out;
}

void Flags::check_all_used(const std::string& command) const {
  for (const auto& [name, value] : values_) {
    TS_CHECK(used_.count(name) != 0, "unknown flag --", name, " (explain ", command,
             " --help lists its flags)");
  }
}

}  // namespace explain
}  // namespace tessera
