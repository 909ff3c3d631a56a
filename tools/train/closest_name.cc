#include "tools/train/closest_name.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdlib>

namespace tessera {
namespace train {

int edit_distance(const std::string& a, const std::string& b) {
  const size_t n = a.size(), m = b.size();
  // d[i][j]: the distance between a's first i characters and b's first j.
  std::vector<std::vector<int>> d(n + 1, std::vector<int>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = static_cast<int>(i);
  for (size_t j = 0; j <= m; ++j) d[0][j] = static_cast<int>(j);
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      const int substitution = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + substitution});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);  // two neighbours swapped
      }
    }
  }
  return d[n][m];
}

namespace {

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

// How far apart the numbers are where `typed` and `name` differ (zero4, zero3: 1), or INT_MAX
// when what differs is not a number in both.
long number_gap(const std::string& typed, const std::string& name) {
  size_t prefix = 0;
  while (prefix < typed.size() && prefix < name.size() && typed[prefix] == name[prefix]) ++prefix;
  // Back to the start of a number the common prefix ends inside (resnet3|0 against resnet3|2).
  while (prefix > 0 && std::isdigit(static_cast<unsigned char>(typed[prefix - 1]))) --prefix;
  size_t suffix = 0;
  while (suffix < typed.size() - prefix && suffix < name.size() - prefix &&
         typed[typed.size() - 1 - suffix] == name[name.size() - 1 - suffix]) {
    ++suffix;
  }
  // And on to the end of a number the common suffix starts inside (resnet|3|0 against
  // resnet|2|0 compares 30 with 20).
  while (suffix > 0 && std::isdigit(static_cast<unsigned char>(typed[typed.size() - suffix]))) {
    --suffix;
  }
  const std::string a = typed.substr(prefix, typed.size() - prefix - suffix);
  const std::string b = name.substr(prefix, name.size() - prefix - suffix);
  if (!all_digits(a) || !all_digits(b) || a.size() > 9 || b.size() > 9) return LONG_MAX;
  return std::labs(std::atol(a.c_str()) - std::atol(b.c_str()));
}

}  // namespace

std::vector<std::string> closest_names(const std::string& typed,
                                       const std::vector<std::string>& known) {
  const int limit = std::max<int>(1, static_cast<int>(typed.size()) / 3);
  int best = INT_MAX;
  std::vector<std::string> names;
  for (const std::string& name : known) {
    const int d = edit_distance(typed, name);
    if (d > limit || d > best || name == typed) continue;
    if (d < best) names.clear();
    best = d;
    names.push_back(name);
  }
  if (names.size() > 1) {
    long nearest = LONG_MAX;
    for (const std::string& name : names) nearest = std::min(nearest, number_gap(typed, name));
    if (nearest != LONG_MAX) {
      names.erase(std::remove_if(names.begin(), names.end(),
                                 [&](const std::string& name) {
                                   return number_gap(typed, name) != nearest;
                                 }),
                  names.end());
    }
  }
  return names;
}

std::string did_you_mean(const std::string& typed, const std::vector<std::string>& known,
                         const std::string& prefix) {
  const std::vector<std::string> names = closest_names(typed, known);
  if (names.empty()) return "";
  std::string s = "; did you mean ";
  for (size_t i = 0; i < names.size(); ++i) {
    s += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + prefix + names[i];
  }
  return s + "?";
}

}  // namespace train
}  // namespace tessera
