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
// blocks (the first with a Scale in front, below), cut uniformly (or --balance=time:
// torchgpipe's balance_by_time), so every stage (and, interleaved, every chunk) computes about
// the same; the last stage adds the loss. One thread per rank, one rank per core. A message
// carries batch/M x width floats and its stage computes layers/K Linears on them, so the wider
// or deeper the model, the cheaper its messages relative to its compute: at the default 64
// layers a received message costs about 0.1% of a micro-batch's backward (M = 16), at 16 layers
// four times as much, which shows in the "+messages" column. A step takes about 5.5 s (64
// layers), the default run about 13 minutes.
//
// Each timed step starts with a barrier, so the stages start together and the step is one
// window for all of them, as in the papers' figures: its length is the makespan (the slowest
// stage's action list) and a stage's idle fraction is 1 - its compute / the makespan. Without
// the barrier a stage that finished early would start the next step's list early and count
// the other stage's tail as its own wait.
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

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "autograd/functions.h"
#include "dist/environment.h"
#include "nn/nn.h"
#include "pipeline/pipe.h"
#include "pipeline/schedule.h"
#include "pipeline/timing_model.h"
#include "pipeline/trace.h"
#include "pipeline/trace_stats.h"
#include "tensor/check.h"
#include "tensor/ops.h"
#include "tensor/parallel.h"
#include "tools/bench/pipeline_bench_messages.h"

using namespace tessera;
using pipeline::median;

namespace {

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  for (size_t at = 0; at <= list.size();) {
    const size_t comma = std::min(list.find(',', at), list.size());
    out.push_back(list.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

// A learned per-feature scale. In front of the first Linear it makes the first Linear's input
// require grad, so stage 0's backward runs the same three GEMMs per Linear (output, weight and
// input gradients) as every other stage's instead of two for its first: without it stage 0's
// backward of a micro-batch is one GEMM shorter (2% at 16 Linears a stage), and in GPipe's
// backward phase it then waits that difference at each of its M-1 gradient receives (M = 16:
// measured +0.02 idle on stage 0).
class Scale : public nn::Module {
 public:
  explicit Scale(int64_t width) : scale_(register_parameter("scale", ones({width}))) {}
  std::string type_name() const override { return "Scale"; }
  Variable forward(const Variable& x) override { return x * scale_; }

 private:
  Variable scale_;
};

std::shared_ptr<nn::Sequential> model(int64_t width, int layers) {
  manual_seed(0);
  auto m = std::make_shared<nn::Sequential>();
  for (int i = 0; i < layers; ++i) {
    auto block = std::make_shared<nn::Sequential>();
    if (i == 0) block->push_back(std::make_shared<Scale>(width));
    block->push_back(std::make_shared<nn::Linear>(width, width));
    block->push_back(std::make_shared<nn::ReLU>());
    m->push_back(block);
  }
  return m;
}

// One step's spans (every rank's) played back by the timing model three ways: with each stage's
// mean compute times and free messages; with the messages' median costs too; and replayed, each
// computation and send as long as it took, each receive the median copy (its span also holds
// the wait, which the replay is to explain).
struct ModeledStep {
  std::vector<pipeline::StageTimes> times;
  pipeline::MessageStats messages;
  pipeline::TimedStep stages, with_messages, replayed;
};

ModeledStep model_step(const std::vector<std::vector<pipeline::Span>>& spans,
                       const std::vector<std::vector<pipeline::Action>>& lists, int v) {
  ModeledStep m;
  for (const auto& rank_spans : spans) m.times.push_back(pipeline::stage_times(rank_spans));
  m.messages = pipeline::message_stats(spans);
  m.stages = pipeline::play_timed(lists, v, m.times);
  m.with_messages = pipeline::play_timed(lists, v, m.times, m.messages.costs);
  for (size_t s = 0; s < lists.size(); ++s) {
    TS_CHECK(spans[s].size() >= lists[s].size(), "pipeline_bench: stage ", s, " has ",
             spans[s].size(), " spans for ", lists[s].size(), " actions");
    for (size_t n = 0; n < lists[s].size(); ++n) {
      TS_CHECK(spans[s][n].action == lists[s][n], "pipeline_bench: stage ", s, "'s span ", n,
               " is ", pipeline::span_name(spans[s][n], v > 1), ", its list says ",
               pipeline::to_string(lists[s][n], v > 1));
    }
  }
  const double receive = m.messages.costs.receive;
  m.replayed = pipeline::play_timed(lists, v, [&](int s, size_t n) {
    const pipeline::Span& span = spans[s][n];
    const bool is_receive = span.action.kind == pipeline::ActionKind::kRecvActivation ||
                            span.action.kind == pipeline::ActionKind::kRecvGradient;
    return is_receive ? receive : span.end - span.start;
  });
  return m;
}

// The jitter: how much a stage's backwards of equal micro-batches differ within a step
// (standard deviation over mean).
double backward_spread(const std::vector<pipeline::Span>& spans) {
  double sum = 0, squares = 0;
  int n = 0;
  for (const pipeline::Span& span : spans) {
    if (span.reduction || span.action.kind != pipeline::ActionKind::kBackward) continue;
    const double d = span.end - span.start;
    sum += d, squares += d * d, ++n;
  }
  if (n < 2) return 0;
  const double mean = sum / n;
  return std::sqrt(std::max(0.0, squares / n - mean * mean)) / mean;
}

}  // namespace

int main(int argc, char** argv) {
  auto world = dist::init(&argc, &argv);
  int64_t width = 1024, batch = 2048;
  int layers = 64, steps = 7;
  std::string microbatches = "1,2,4,8,16", schedules = "gpipe,1f1b,interleaved";
  bool breakdown = false, messages = false;
  bench::MessageBenchOptions message_options;
  std::string balance = "uniform";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&](const char* flag) {
      return a.compare(0, std::strlen(flag), flag) == 0 ? a.substr(std::strlen(flag)) : std::string();
    };
    if (!value("--width=").empty()) {
      width = std::stoll(value("--width="));
    } else if (!value("--batch=").empty()) {
      batch = std::stoll(value("--batch="));
    } else if (!value("--layers=").empty()) {
      layers = std::stoi(value("--layers="));
    } else if (!value("--steps=").empty()) {
      steps = std::max(1, std::stoi(value("--steps=")));
    } else if (!value("--microbatches=").empty()) {
      microbatches = value("--microbatches=");
    } else if (!value("--schedules=").empty()) {
      schedules = value("--schedules=");
    } else if (!value("--balance=").empty()) {
      balance = value("--balance=");
    } else if (a == "--breakdown") {
      breakdown = true;
    } else if (a == "--messages") {
      messages = true;
    } else if (!value("--sizes=").empty()) {
      message_options.sizes = value("--sizes=");
    } else if (!value("--batches=").empty()) {
      message_options.batches = std::max(1, std::stoi(value("--batches=")));
    } else {
      if (world->rank() == 0) {
        std::fprintf(stderr, "pipeline_bench: unknown flag %s (--width=N --layers=N --batch=N "
                     "--steps=N --microbatches=1,2,4 --schedules=gpipe,1f1b,interleaved; --messages "
                     "--sizes=4096,65536 --batches=N)\n", argv[i]);
      }
      return 2;
    }
  }
  set_num_threads(1);
  if (messages) {
    bench::run_message_bench(world, message_options);
    return 0;
  }
  const int K = world->size();
  if (world->rank() == 0) {
    std::printf("pipeline_bench: K = %d stages (one rank each, 1 thread), %d x Linear(%lld) + "
                "ReLU, batch %lld, median of %d steps; idle fractions\n", K, layers,
                static_cast<long long>(width), static_cast<long long>(batch), steps);
    std::printf("%-12s %3s %6s | %-14s | %-14s | %-14s | %-14s | %11s | %8s\n", "", "", "",
                "measured", "model: stages", "+messages", "replayed", "unexplained", "");
    std::printf("%-12s %3s %6s | %6s %7s | %6s %7s | %6s %7s | %6s %7s | %11s | %8s\n", "schedule",
                "M", "theory", "mean", "bottlen", "mean", "bottlen", "mean", "bottlen", "mean",
                "bottlen", "bottlen", "step ms");
  }
  Generator g(1);
  const Tensor x = randn({batch, width}, kF32, &g);
  const Tensor y = argmax(x.narrow(1, 0, 10), 1);
  for (const std::string& schedule : split(schedules)) {
    const int v = schedule == "interleaved" ? 2 : 1;
    for (const std::string& m_text : split(microbatches)) {
      const int M = std::stoi(m_text);
      if (schedule == "interleaved" && M % K != 0) continue;  // it needs a multiple of K
      pipeline::Pipe pipe(model(width, layers), world,
                          [](const Variable& out, const Tensor& target) {
                            return cross_entropy(out, target);
                          },
                          pipeline::PipeOptions()
                              .microbatches(M)
                              .schedule(schedule)
                              .chunks_per_rank(v)
                              .balance(balance)
                              .sample(x.narrow(0, 0, (batch + M - 1) / M)));
      // The executor's lists (pipe.cc): sends moved up to right after what they send.
      auto lists = pipeline::make_schedules(pipeline::parse_schedule(schedule), K, M, v);
      for (auto& list : lists) list = pipeline::eager_sends(list);
      // Per timed step. idle: this rank's.
      std::vector<double> idle, step_ms, bottleneck, stages_mean, stages_bottleneck, full_mean,
          full_bottleneck, replay_mean, replay_bottleneck, waited_ms;
      std::vector<std::vector<pipeline::Span>> spans;
      ModeledStep last;
      for (int i = 0; i < steps + 1; ++i) {
        for (const Variable& p : pipe.parameters()) p.zero_grad();
        world->barrier()->wait();
        pipe.train_step(x, y);
        if (i == 0) continue;  // warm-up
        // The makespan: every stage's list started at the barrier; the last one to end ends it.
        // The bottleneck: the stage that computed longest.
        Tensor t = from_vector<double>({pipe.stats().step_seconds, pipe.stats().busy_seconds}, {2});
        world->all_reduce(t, dist::ReduceOp::kMax)->wait();
        const double makespan = t.to_vector<double>()[0], most_busy = t.to_vector<double>()[1];
        idle.push_back(1.0 - pipe.stats().busy_seconds / makespan);
        bottleneck.push_back(1.0 - most_busy / makespan);
        step_ms.push_back(makespan * 1e3);
        // The timing model (rank 0 reports it; the trace is gathered on every rank).
        spans = pipeline::gather_trace(pipe.trace(), *world);
        if (world->rank() != 0) continue;
        last = model_step(spans, lists, v);
        stages_mean.push_back(last.stages.mean_idle());
        stages_bottleneck.push_back(last.stages.bottleneck_idle());
        full_mean.push_back(last.with_messages.mean_idle());
        full_bottleneck.push_back(last.with_messages.bottleneck_idle());
        replay_mean.push_back(last.replayed.mean_idle());
        replay_bottleneck.push_back(last.replayed.bottleneck_idle());
        for (double w : last.messages.waited) waited_ms.push_back(w * 1e3);
      }
      Tensor mine = from_vector<double>({median(idle)}, {1});
      Tensor all = empty({K}, kF64);
      world->all_gather(mine, all)->wait();
      if (world->rank() != 0) continue;
      const std::vector<double> stage_idle = all.to_vector<double>();
      double mean = 0;
      for (double d : stage_idle) mean += d / K;
      const double theory = pipeline::bubble_fraction(K, M, v);
      const double bubble = median(bottleneck), replayed_bubble = median(replay_bottleneck);
      std::printf("%-12s %3d %6.3f | %6.3f %7.3f | %6.3f %7.3f | %6.3f %7.3f | %6.3f %7.3f | %+10.0f%% | "
                  "%8.1f\n", schedule.c_str(), M, theory, mean, bubble, median(stages_mean),
                  median(stages_bottleneck), median(full_mean), median(full_bottleneck),
                  median(replay_mean), replayed_bubble, 100.0 * (bubble - replayed_bubble) / theory,
                  median(step_ms));
      if (breakdown) {
        std::printf("    idle per stage:");
        for (double d : stage_idle) std::printf(" %.3f", d);
        std::printf("; last step, ms: forward/backward of a chunk");
        for (const pipeline::StageTimes& st : last.times) {
          std::printf(" %.2f/%.2f", st.forward * 1e3, st.backward * 1e3);
        }
        std::printf(", send %.3f, receive (arrived) %.3f\n", last.messages.costs.send * 1e3,
                    last.messages.costs.receive * 1e3);
        std::printf("    backward time spread (standard deviation / mean), last step:");
        for (const auto& rank_spans : spans) std::printf(" %.1f%%", 100.0 * backward_spread(rank_spans));
        std::printf("\n");
        if (!waited_ms.empty()) {
          std::printf("    %zu messages waited for: latency (ms) median %.3f, max %.3f\n",
                      waited_ms.size(), median(waited_ms),
                      *std::max_element(waited_ms.begin(), waited_ms.end()));
        }
        const double last_step_ms = step_ms.back();
        for (int s = 0; s < K; ++s) {
          double compute = 0, recv = 0, send = 0;
          for (const pipeline::Span& span : spans[s]) {
            const double ms = (span.end - span.start) * 1e3;
            const std::string category = pipeline::span_category(span);
            if (category == "forward" || category == "backward") compute += ms;
            if (category == "recv") recv += ms;
            if (category == "send") send += ms;
          }
          std::printf("    stage %d, last step (ms): compute %.1f, recv %.1f, send %.1f, rest %.1f\n",
                      s, compute, recv, send, last_step_ms - compute - recv - send);
        }
      }
      std::fflush(stdout);
    }
  }
  return 0;
}
