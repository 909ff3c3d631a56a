// expect_error(f, part): f must throw a tessera::Error whose message contains `part` (errors
// name what was wrong, and the tests check that they do).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "tensor/check.h"

namespace tessera {
namespace testing {

inline void expect_error(const std::function<void()>& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing '" << part << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

}  // namespace testing
}  // namespace tessera
