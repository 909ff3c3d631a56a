// The outcome of each parse in the parser fuzz tests: loaded, rejected with tessera::Error (by
// which check fired), or anything else, which is a failure to report with the input saved.
#pragma once

#include <algorithm>
#include <chrono>
#include <exception>
#include <functional>
#include <map>
#include <ostream>
#include <string>
#include <typeinfo>

#include "tensor/check.h"
#include "tests/util/mutate.h"

namespace tessera {
namespace testing {

struct FuzzTally {
  int loaded = 0, rejected = 0;
  std::map<std::string, int> messages;  // rejections by message_kind()
  double slowest = 0, parsing = 0;      // seconds in the parser: the slowest call, all calls

  // Runs `parse` (which reads the whole result when it loads); returns "" or what went wrong.
  std::string run(const std::function<void()>& parse) {
    const auto t0 = std::chrono::steady_clock::now();
    std::string failure;
    try {
      parse();
      ++loaded;
    } catch (const Error& e) {
      ++rejected;
      ++messages[message_kind(e.message())];
    } catch (const std::exception& e) {
      failure = std::string("threw ") + typeid(e).name() + ": " + e.what();
    } catch (...) {
      failure = "threw a non-std exception";
    }
    const double call =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    slowest = std::max(slowest, call);
    parsing += call;
    return failure;
  }

  void print(std::ostream& os, int iterations, double seconds) const {
    os << iterations << " mutated files: " << loaded << " loaded, " << rejected
       << " rejected with tessera::Error, in " << seconds << " s (" << parsing
       << " s in the reader, slowest read " << slowest * 1e3 << " ms). Errors by kind:\n";
    for (const auto& [m, n] : messages) os << "  " << n << "\t" << m << "\n";
  }
};

}  // namespace testing
}  // namespace tessera
