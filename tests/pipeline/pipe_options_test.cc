// PipeOptions' typed setters: each enum value gives the option its string form would (the one
// Pipe parses), so a typo is a compile error instead of a run-time one.
#include <gtest/gtest.h>

#include "pipeline/pipe.h"

namespace tessera {
namespace pipeline {
namespace {

TEST(PipeOptions, TypedSchedulesAndCheckpointsEqualTheirNames) {
  for (ScheduleKind k : {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB, ScheduleKind::kInterleaved,
                         ScheduleKind::kZBH1, ScheduleKind::kZBH2}) {
    const PipeOptions o = PipeOptions().schedule(k);
    EXPECT_EQ(parse_schedule(o.schedule()), k) << o.schedule();
  }
  EXPECT_EQ(PipeOptions().schedule(ScheduleKind::kZBH1).schedule(), "zb-h1");
  for (Checkpoint c : {Checkpoint::kNever, Checkpoint::kExceptLast, Checkpoint::kAlways}) {
    const PipeOptions o = PipeOptions().checkpoint(c);
    EXPECT_EQ(parse_checkpoint(o.checkpoint()), c) << o.checkpoint();
  }
  EXPECT_EQ(PipeOptions().checkpoint(Checkpoint::kExceptLast).checkpoint(), "except_last");
}

TEST(PipeOptions, TypedBalancesEqualTheSpecsPipeParses) {
  EXPECT_EQ(PipeOptions().balance(Balance::kUniform).balance(), "uniform");
  EXPECT_EQ(PipeOptions().balance(Balance::kParams).balance(), "params");
  EXPECT_EQ(PipeOptions().balance(Balance::kTime).balance(), "time");
  // An explicit cut, as parse_balance reads it back.
  const PipeOptions o = PipeOptions().balance(std::vector<int>{3, 4, 3});
  EXPECT_EQ(o.balance(), "3,4,3");
  EXPECT_EQ(parse_balance(o.balance()), (std::vector<int>{3, 4, 3}));
}

}  // namespace
}  // namespace pipeline
}  // namespace tessera
