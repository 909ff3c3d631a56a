#include "tools/launch/hostfile.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "tensor/check.h"

namespace tessera {
namespace launch {

int hostfile_slots(const std::string& path) {
  std::ifstream in(path);
  TS_CHECK(in.good(), "launch: cannot read the hostfile '", path, "'");
  int total = 0, number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    const size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::string node, word;
    if (!(words >> node)) continue;  // blank
    int slots = 1;
    while (words >> word) {
      if (word.compare(0, 6, "slots=") != 0) continue;
      char* end = nullptr;
      const long v = std::strtol(word.c_str() + 6, &end, 10);
      TS_CHECK(word.size() > 6 && *end == '\0' && v >= 0, "launch: hostfile '", path, "' line ",
               number, ": '", word, "' is not slots=COUNT");
      slots = static_cast<int>(v);
    }
    total += slots;
  }
  return total;
}

}  // namespace launch
}  // namespace tessera
