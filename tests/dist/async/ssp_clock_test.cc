// The SSP rule alone: who may start which iteration under bounds 0, 2 and unbounded; finished
// workers hold nobody back; the lag; the bound in updates, (W - 1)(2B + 1), written out.
#include "dist/async/ssp_clock.h"

#include <gtest/gtest.h>

#include <climits>

namespace tessera {
namespace dist {
namespace {

TEST(SSPClock, BoundTwoLetsAWorkerRunTwoIterationsAheadOfTheSlowest) {
  SSPClock c(3, 2);
  for (int i = 0; i < 5; ++i) c.pushed(0);  // w0 = 5
  for (int i = 0; i < 3; ++i) c.pushed(1);  // w1 = 3
  for (int i = 0; i < 4; ++i) c.pushed(2);  // w2 = 4
  EXPECT_EQ(c.slowest(), 3);
  EXPECT_TRUE(c.may_start(5));   // 5 - 2 = 3 <= 3
  EXPECT_FALSE(c.may_start(6));  // 6 - 2 = 4 > 3
  EXPECT_EQ(c.lag(5), 2);
  c.pushed(1);
  EXPECT_TRUE(c.may_start(6));
  EXPECT_EQ(c.max_updates_between(), 2 * 5);
}

TEST(SSPClock, BoundZeroIsSynchronous) {
  SSPClock c(2, 0);
  EXPECT_TRUE(c.may_start(0));
  c.pushed(0);
  EXPECT_FALSE(c.may_start(1));  // w1 has not pushed iteration 0
  c.pushed(1);
  EXPECT_TRUE(c.may_start(1));
  EXPECT_EQ(c.max_updates_between(), 1);  // the other worker's push of the same iteration
}

TEST(SSPClock, UnboundedNeverWaits) {
  SSPClock c(2, -1);
  for (int i = 0; i < 100; ++i) c.pushed(0);
  EXPECT_TRUE(c.may_start(100));
  EXPECT_EQ(c.lag(100), 100);
  EXPECT_EQ(c.max_updates_between(), -1);
}

TEST(SSPClock, AFinishedWorkerHoldsNobodyBack) {
  SSPClock c(2, 0);
  c.pushed(0);
  EXPECT_FALSE(c.may_start(1));
  c.finished(1);
  EXPECT_TRUE(c.may_start(1));
  EXPECT_EQ(c.slowest(), 1);
  EXPECT_FALSE(c.all_finished());
  c.finished(0);
  EXPECT_TRUE(c.all_finished());
  EXPECT_EQ(c.slowest(), INT64_MAX);
}

// A resumed run's clocks continue where the checkpoint's stopped: the bound applies to them
// as if the run had never stopped, and a worker finished before the checkpoint runs again.
TEST(SSPClock, RestoredClocksContinueUnderTheBound) {
  SSPClock c(3, 1);
  c.finished(2);
  c.restore({8, 6, 7});
  EXPECT_FALSE(c.is_finished(2));
  EXPECT_EQ(c.clock(0), 8);
  EXPECT_EQ(c.slowest(), 6);
  EXPECT_TRUE(c.may_start(7));   // 7 - 1 = 6 <= 6
  EXPECT_FALSE(c.may_start(8));  // worker 0's next iteration waits for worker 1
  c.pushed(1);
  EXPECT_TRUE(c.may_start(8));
  EXPECT_EQ(c.clock(1), 7);
  try {
    c.restore({1, 2});
    FAIL();
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("2 clocks for 3 workers"), std::string::npos) << e.what();
  }
  try {
    c.restore({1, -1, 2});
    FAIL();
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("worker 1's clock is -1"), std::string::npos) << e.what();
  }
}

TEST(SSPClock, BadValuesAreNamed) {
  try {
    SSPClock(2, -2);
    FAIL();
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("staleness bound -2"), std::string::npos) << e.what();
  }
  SSPClock c(2, 1);
  try {
    c.pushed(2);
    FAIL();
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("worker 2 out of range [0, 2)"), std::string::npos)
        << e.what();
  }
  c.finished(0);
  EXPECT_THROW(c.pushed(0), std::exception);  // a finished worker pushes no more
}

}  // namespace
}  // namespace dist
}  // namespace tessera
