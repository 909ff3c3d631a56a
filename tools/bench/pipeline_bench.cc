// Pipeline bubble benchmark (issue 11): the fraction of a step each stage spends not computing,
// measured from the executor's timestamps, beside the formula (K-1)/(vM+K-1) and beside the
// timing model (pipeline/timing_model.h) played with what this run measured, for GPipe, 1F1B
// and interleaved 1F1B over M = 1, 2, 4, 8, 16.
//
//   bazel build //tools/bench:pipeline_bench
//   mpirun -np 2 --bind-to core bazel-bin/tools/bench/pipeline_bench [--width=1024 --layers=64
//       --batch=2048 --steps=7 --microbatches=1,2,4,8,16 --schedules=gpipe,1f1b,interleaved
//       --balance=uniform|params|time|a,b --breakdown]
//
// The model is balanced by construction: `layers` identical Linear(width, width) + ReLU
// blocks (the first with a Scale in front: pipeline_bench_model.cc), cut uniformly (or
// --balance=time: torchgpipe's balance_by_time), so every stage (and, interleaved, every chunk)
// computes about the same; the last stage adds the loss. One thread per rank, one rank per core. A message
// carries batch/M x width floats and its stage computes layers/K Linears on them, so the wider
// or deeper the model, the cheaper its messages relative to its compute: at the default 64
// layers a received message costs about 0.1% of a micro-batch's backward (M = 16), at 16 layers
// four times as much, which shows in the "+messages" column. A step takes about 5.5 s (64
// layers), the default run about 13 minutes.
//
// Each timed step starts with a barrier, so the stages start together and the step is one
// window for all of them, as in the papers' figures (pipeline_bench_steps.h says why).
//
// Per (schedule, M), medians over the timed steps:
//   measured:  the stages' mean idle fraction, and the bottleneck's (the stage that computed
//              longest: 1 - its compute / the makespan, the papers' bubble);
//   stages:    the timing model with each stage's measured forward and backward times, free
//              messages: the formula moved by the stages' imbalance alone (the two cores of this
//              machine differ by about 1%, which moves interleaved M = 16 by up to 30%);
//   +messages: the model also charging each send and receive its measured median cost;
//   replayed:  the step's lists played with each computation's and send's own measured
//              duration (the compute's jitter included) and the median receive;
//   unexplained: measured - replayed, the bottleneck's, in % of the formula: what the executor
//              adds beyond what its actions took (time between actions, receives that cost
//              more than the median).
// --breakdown adds, per (schedule, M): each stage's idle, the last step's stage times and
// message costs, the latency of messages a stage waited for, and each stage's last step by
// kind of span (compute, recv, send, and the rest: between spans and after its list ended).
//
// --messages runs instead what one stage-to-stage message costs beside MPI's own ping-pong
// (pipeline_bench_messages.h).
//
// The pieces: pipeline_bench_flags (the command line), pipeline_bench_model (the network),
// pipeline_bench_steps (the timed steps), pipeline_bench_modeled_step (the timing model's plays
// of a step), pipeline_bench_report (the table).

#include <memory>
#include <string>
#include <vector>

#include "autograd/functions.h"
#include "dist/environment.h"
#include "pipeline/pipe.h"
#include "pipeline/schedule.h"
#include "tensor/ops.h"
#include "tensor/parallel.h"
#include "tools/bench/bench_flags.h"
#include "tools/bench/pipeline_bench_flags.h"
#include "tools/bench/pipeline_bench_messages.h"
#include "tools/bench/pipeline_bench_model.h"
#include "tools/bench/pipeline_bench_report.h"
#include "tools/bench/pipeline_bench_steps.h"

using namespace tessera;

namespace {

// One (schedule, M): its pipe over the balanced model, the timed steps, rank 0's row.
void run_schedule(const std::shared_ptr<dist::ProcessGroup>& world,
                  const bench::PipelineBenchFlags& flags, const std::string& schedule, int M,
                  const Tensor& x, const Tensor& y) {
  const int K = world->size();
  const int v = schedule == "interleaved" ? 2 : 1;
  pipeline::Pipe pipe(bench::balanced_model(flags.width, flags.layers), world,
                      [](const Variable& out, const Tensor& target) {
                        return cross_entropy(out, target);
                      },
                      pipeline::PipeOptions()
                          .microbatches(M)
                          .schedule(schedule)
                          .chunks_per_rank(v)
                          .balance(flags.balance)
                          .sample(x.narrow(0, 0, (flags.batch + M - 1) / M)));
  // The executor's lists (pipe.cc): sends moved up to right after what they send.
  auto lists = pipeline::make_schedules(pipeline::parse_schedule(schedule), K, M, v);
  for (auto& list : lists) list = pipeline::eager_sends(list);
  const bench::StepSeries series = bench::time_steps(pipe, *world, lists, v, x, y, flags.steps);
  const std::vector<double> stage_idle = bench::gather_stage_idle(series, *world);
  if (world->rank() != 0) return;
  bench::print_bubble_row(schedule, M, v, stage_idle, series);
  if (flags.breakdown) bench::print_breakdown(stage_idle, series);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  auto world = dist::init(&argc, &argv);
  bench::PipelineBenchFlags flags;
  if (!bench::parse_pipeline_bench_flags(argc, argv, world->rank() == 0, &flags)) return 2;
  set_num_threads(1);
  if (flags.messages) {
    bench::run_message_bench(world, flags.message_options);
    return 0;
  }
  const int K = world->size();
  if (world->rank() == 0) bench::print_bubble_header(flags, K);
  Generator g(1);
  const Tensor x = randn({flags.batch, flags.width}, kF32, &g);
  const Tensor y = argmax(x.narrow(1, 0, 10), 1);
  for (const std::string& schedule : bench::split_commas(flags.schedules)) {
    for (const int M : flags.microbatches) {
      if (schedule == "interleaved" && M % K != 0) continue;  // it needs a multiple of K
      run_schedule(world, flags, schedule, M, x, y);
    }
  }
  return 0;
}
