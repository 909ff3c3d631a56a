// The train tool's flag checker on a command line written as one string, for the tests of the
// flag table and the support table (no process is started).
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "tools/train/flags.h"

namespace tessera {
namespace train {

// read_flags on the words of `line`.
inline Config read(const std::string& line) {
  std::istringstream words(line);
  std::vector<std::string> args;
  for (std::string w; words >> w;) args.push_back(w);
  return read_flags(args);
}

// The FlagError `line` raises, or "(no error)".
inline std::string error_of(const std::string& line) {
  try {
    read(line);
  } catch (const FlagError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace train
}  // namespace tessera
