#include "dist/settings_check.h"

#include <map>

#include "dist/gather_bytes.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {

namespace {

std::string encode(const Settings& settings) {
  std::string text;
  for (const auto& [key, value] : settings) {
    TS_CHECK(key.find('\n') == std::string::npos && key.find('\t') == std::string::npos &&
                 value.find('\n') == std::string::npos,
             "verify_same_settings: setting '", key, "' has a tab or newline in its name or value");
    text += key + "\t" + value + "\n";
  }
  return text;
}

Settings decode(const std::string& text) {
  Settings out;
  size_t at = 0;
  while (at < text.size()) {
    const size_t tab = text.find('\t', at), end = text.find('\n', at);
    out.emplace_back(text.substr(at, tab - at), text.substr(tab + 1, end - tab - 1));
    at = end + 1;
  }
  return out;
}

// "64 on ranks 0, 2, 3; 32 on rank 1" ("(missing)" where a rank lacks the setting).
std::string values_by_rank(const std::vector<std::map<std::string, std::string>>& all,
                           const std::string& key) {
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  for (size_t r = 0; r < all.size(); ++r) {
    const auto it = all[r].find(key);
    const std::string value = it == all[r].end() ? "(missing)" : it->second;
    auto g = groups.begin();
    while (g != groups.end() && g->first != value) ++g;
    if (g == groups.end()) {
      groups.push_back({value, {}});
      g = groups.end() - 1;
    }
    g->second.push_back(static_cast<int>(r));
  }
  std::string out;
  for (const auto& [value, ranks] : groups) {
    out += (out.empty() ? "" : "; ") + value + (ranks.size() == 1 ? " on rank " : " on ranks ");
    for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  }
  return out;
}

}  // namespace

void verify_same_settings(const Settings& settings, ProcessGroup& group) {
  const std::vector<std::string> texts = all_gather_bytes(encode(settings), group);
  const int n = group.size();

  // Every rank holds every rank's settings now and reaches the same verdict.
  std::vector<Settings> lists;
  std::vector<std::map<std::string, std::string>> maps;
  for (const std::string& text : texts) {
    lists.push_back(decode(text));
    maps.emplace_back(lists.back().begin(), lists.back().end());
  }
  // Keys in first-seen order, rank 0's first.
  std::vector<std::string> keys;
  for (const Settings& list : lists) {
    for (const auto& [key, value] : list) {
      bool seen = false;
      for (const std::string& k : keys) seen = seen || k == key;
      if (!seen) keys.push_back(key);
    }
  }
  for (const std::string& key : keys) {
    const auto first = maps[0].find(key);
    bool same = first != maps[0].end();
    for (int r = 1; r < n && same; ++r) {
      const auto other = maps[r].find(key);
      same = other != maps[r].end() && other->second == first->second;
    }
    TS_CHECK(same, "ranks disagree on \"", key, "\": ", values_by_rank(maps, key),
             ". Every rank must be started with the same configuration");
  }
}

}  // namespace dist
}  // namespace tessera
