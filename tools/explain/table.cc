#include "tools/explain/table.h"

#include <algorithm>
#include <cstdio>

namespace tessera {
namespace explain {

Table::Table(std::vector<std::string> header, std::vector<size_t> left) : left_(std::move(left)) {
  rows_.push_back(std::move(header));
}

void Table::add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }

std::string Table::str() const {
  std::vector<size_t> width;
  for (const auto& row : rows_) {
    width.resize(std::max(width.size(), row.size()), 0);
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  for (const auto& row : rows_) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      const std::string pad(width[c] - row[c].size(), ' ');
      const bool left = std::find(left_.begin(), left_.end(), c) != left_.end();
      if (c > 0) line += "  ";
      line += left ? row[c] + pad : pad + row[c];
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

std::string megabytes(double bytes) { return fixed(bytes / 1e6, 3) + " MB"; }

std::string milliseconds(double seconds) { return fixed(seconds * 1e3, 3); }

}  // namespace explain
}  // namespace tessera
