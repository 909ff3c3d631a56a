// The local SGD schedule (dist/local_sgd/model_averager.h), a pure function, as literal tables:
// which optimizer steps end a round.
#include <gtest/gtest.h>

#include <string>

#include "dist/local_sgd/model_averager.h"

namespace tessera {
namespace dist {
namespace {

// 'A' where the step communicates, '.' where it does not.
std::string row(int64_t period, int64_t warmup, int steps) {
  std::string out;
  for (int k = 0; k < steps; ++k) out += communicates_after(k, period, warmup) ? 'A' : '.';
  return out;
}

TEST(LocalSgdSchedule, LiteralTables) {
  //                     step: 0123456789012345
  EXPECT_EQ(row(1, 0, 16), "AAAAAAAAAAAAAAAA");
  EXPECT_EQ(row(4, 0, 16), "...A...A...A...A");
  EXPECT_EQ(row(4, 2, 16), ".....A...A...A..");  // the picture in model_averager.h
  EXPECT_EQ(row(4, 3, 16), "......A...A...A.");
  EXPECT_EQ(row(3, 2, 16), "....A..A..A..A..");
  EXPECT_EQ(row(1, 5, 16), ".....AAAAAAAAAAA");
  EXPECT_EQ(row(16, 0, 16), "...............A");
}

TEST(LocalSgdSchedule, BadValuesAreNamed) {
  for (int64_t period : {0, -2}) {
    try {
      communicates_after(3, period, 0);
      ADD_FAILURE() << "no error for period " << period;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("period must be >= 1, got " + std::to_string(period)),
                std::string::npos) << e.what();
    }
  }
  try {
    communicates_after(3, 2, -1);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("warmup_steps must be >= 0, got -1"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace dist
}  // namespace tessera
