// Table: rows of text cells printed in aligned columns under a header, names and formulas
// aligned left, numbers right.
//
//   strategy   parameters  gradients  ...
//   ddp          0.407 MB   0.407 MB  ...
#pragma once

#include <string>
#include <vector>

namespace tessera {
namespace explain {

class Table {
 public:
  // `left`: the columns aligned left (names, formulas); the others are aligned right.
  explicit Table(std::vector<std::string> header, std::vector<size_t> left = {0});
  void add(std::vector<std::string> row);
  std::string str() const;

 private:
  std::vector<std::vector<std::string>> rows_;
  std::vector<size_t> left_;
};

std::string fixed(double v, int digits);      // "%.*f"
std::string megabytes(double bytes);           // "0.407 MB" (10^6 bytes)
std::string milliseconds(double seconds);      // "12.345"

}  // namespace explain
}  // namespace tessera
