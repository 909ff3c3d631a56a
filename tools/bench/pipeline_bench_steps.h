// pipeline_bench's measurement: timed steps of one (schedule, M) pipe, each a window all stages
// start together.
//
// Each step starts with a barrier, so its length is the makespan (the slowest stage's action
// list) and a stage's idle fraction is 1 - its compute / the makespan, as in the papers'
// figures. Without the barrier a stage that finished early would start the next step's list
// early and count the other stage's tail as its own wait.
#pragma once

#include <memory>
#include <vector>

#include "dist/process_group.h"
#include "pipeline/pipe.h"
#include "pipeline/schedule.h"
#include "pipeline/trace.h"
#include "tools/bench/pipeline_bench_modeled_step.h"

namespace tessera {
namespace bench {

// Per timed step. idle is this rank's; step_ms and bottleneck (the idle of the stage that
// computed longest: the papers' bubble) every rank's alike; the timing model's idles
// (pipeline_bench_modeled_step.h) and the latencies of messages a stage waited for, rank 0's
// only.
struct StepSeries {
  std::vector<double> idle, step_ms, bottleneck;
  std::vector<double> stages_mean, stages_bottleneck, full_mean, full_bottleneck, replay_mean,
      replay_bottleneck, waited_ms;
  std::vector<std::vector<pipeline::Span>> spans;  // the last step's, every rank's
  ModeledStep last;                                // the last step's, on rank 0
};

// One warm-up step, then `steps` timed ones of `pipe` on (x, y). lists: the executor's action
// lists (one per rank) that the traced spans follow; v: chunks per rank.
StepSeries time_steps(pipeline::Pipe& pipe, dist::ProcessGroup& world,
                      const std::vector<std::vector<pipeline::Action>>& lists, int v,
                      const Tensor& x, const Tensor& y, int steps);

// Every stage's median idle, gathered on every rank (index: rank).
std::vector<double> gather_stage_idle(const StepSeries& series, dist::ProcessGroup& world);

}  // namespace bench
}  // namespace tessera
