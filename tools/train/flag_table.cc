// What is read off the flag table as a whole: the lookup by name, the strategies check, the
// settings every rank must share, and the defaults --help shows.
#include "tools/train/flag_table.h"

#include <algorithm>
#include <map>

namespace tessera {
namespace train {

const std::vector<FlagSection>& flag_sections() {
  static const std::vector<FlagSection> sections = [] {
    std::vector<FlagSection> all;
    for (auto family : {run_flag_sections, data_parallel_flag_sections,
                        model_parallel_flag_sections}) {
      for (FlagSection& s : family()) all.push_back(std::move(s));
    }
    return all;
  }();
  return sections;
}

const Flag* find_flag(const std::string& name) {
  static const std::map<std::string, const Flag*> by_name = [] {
    std::map<std::string, const Flag*> m;
    for (const FlagSection& s : flag_sections()) {
      for (const Flag& f : s.flags) m.emplace(f.name, &f);
    }
    return m;
  }();
  const auto it = by_name.find(name);
  return it == by_name.end() ? nullptr : it->second;
}

std::vector<std::string> flag_names() {
  std::vector<std::string> names;
  for (const FlagSection& s : flag_sections()) {
    for (const Flag& f : s.flags) names.push_back(f.name);
  }
  return names;
}

std::string shown_default(const Flag& flag) {
  return flag.default_text.empty() ? flag.value.show(Config()) : flag.default_text;
}

namespace {

// "ddp", "ddp or zero2", "ddp, zero2 or pipeline".
std::string listed(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size(); ++i) {
    s += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  }
  return s;
}

}  // namespace

void check_strategies(const Config& c) {
  for (const FlagSection& s : flag_sections()) {
    for (const Flag& f : s.flags) {
      if (f.strategies.empty() || c.given.count(f.name) == 0 ||
          std::find(f.strategies.begin(), f.strategies.end(), c.strategy) != f.strategies.end()) {
        continue;
      }
      bad("--" + f.name + (f.strategy_why.empty() ? "" : " " + f.strategy_why + ": it") +
          " needs --strategy=" + listed(f.strategies) + " (got --strategy=" + c.strategy + ")");
    }
  }
}

std::vector<std::pair<std::string, std::string>> settings_that_must_agree(const Config& c) {
  std::vector<std::pair<std::string, std::string>> settings;
  for (const FlagSection& s : flag_sections()) {
    for (const Flag& f : s.flags) {
      if (!f.must_agree) continue;
      settings.emplace_back(f.agreed_name.empty() ? f.name : f.agreed_name,
                            f.agreed_value ? f.agreed_value(c) : f.value.show(c));
    }
  }
  return settings;
}

}  // namespace train
}  // namespace tessera
