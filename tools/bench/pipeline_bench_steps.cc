#include "tools/bench/pipeline_bench_steps.h"

#include "pipeline/trace_stats.h"
#include "tensor/ops.h"

namespace tessera {
namespace bench {

StepSeries time_steps(pipeline::Pipe& pipe, dist::ProcessGroup& world,
                      const std::vector<std::vector<pipeline::Action>>& lists, int v,
                      const Tensor& x, const Tensor& y, int steps) {
  StepSeries s;
  for (int i = 0; i < steps + 1; ++i) {
    for (const Variable& p : pipe.parameters()) p.zero_grad();
    world.barrier()->wait();
    pipe.train_step(x, y);
    if (i == 0) continue;  // warm-up
    // The makespan: every stage's list started at the barrier; the last one to end ends it.
    // The bottleneck: the stage that computed longest.
    Tensor t = from_vector<double>({pipe.stats().step_seconds, pipe.stats().busy_seconds}, {2});
    world.all_reduce(t, dist::ReduceOp::kMax)->wait();
    const double makespan = t.to_vector<double>()[0], most_busy = t.to_vector<double>()[1];
    s.idle.push_back(1.0 - pipe.stats().busy_seconds / makespan);
    s.bottleneck.push_back(1.0 - most_busy / makespan);
    s.step_ms.push_back(makespan * 1e3);
    // The timing model (rank 0 reports it; the trace is gathered on every rank).
    s.spans = pipeline::gather_trace(pipe.trace(), world);
    if (world.rank() != 0) continue;
    s.last = model_step(s.spans, lists, v);
    s.stages_mean.push_back(s.last.stages.mean_idle());
    s.stages_bottleneck.push_back(s.last.stages.bottleneck_idle());
    s.full_mean.push_back(s.last.with_messages.mean_idle());
    s.full_bottleneck.push_back(s.last.with_messages.bottleneck_idle());
    s.replay_mean.push_back(s.last.replayed.mean_idle());
    s.replay_bottleneck.push_back(s.last.replayed.bottleneck_idle());
    for (double w : s.last.messages.waited) s.waited_ms.push_back(w * 1e3);
  }
  return s;
}

std::vector<double> gather_stage_idle(const StepSeries& series, dist::ProcessGroup& world) {
  Tensor mine = from_vector<double>({pipeline::median(series.idle)}, {1});
  Tensor all = empty({world.size()}, kF64);
  world.all_gather(mine, all)->wait();
  return all.to_vector<double>();
}

}  // namespace bench
}  // namespace tessera
