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

}  // namespace
}  // namespace pipeline
}  // namespace tessera
