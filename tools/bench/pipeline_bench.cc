// Pipeline bubble benchmark (issue 11): the fraction of a step each stage spends not computing,
// measured from the executor's timestamps, beside the formula (K-1)/(vM+K-1), for GPipe, 1F1B
// and interleaved 1F1B over M = 1, 2, 4, 8, 16.
//
//   bazel build //tools/bench:pipeline_bench
//   mpirun -np 2 --bind-to core bazel-bin/tools/bench/pipeline_bench [--width=1024 --layers=16
//       --batch=2048 --steps=7 --microbatches=1,2,4,8,16 --schedules=gpipe,1f1b,interleaved
//       --balance=uniform|params|time|a,b --breakdown]
//
// The model is balanced by construction: `layers` identical Linear(width, width) + ReLU
// blocks (the first with a Scale in front, below), cut uniformly (or --balance=time:
// torchgpipe's balance_by_time), so every stage (and, interleaved, every chunk) computes about
// the same; the last stage adds the loss. One thread per rank, one rank per core. The formula
// assumes free messages and equal stages, so what the measurement adds above it is the cost of
// the messages (each micro-batch's activation and gradient, batch/M x width floats), any
// imbalance and the compute's jitter; a wider model or a larger batch makes the messages
// relatively cheaper.
//
// Each timed step starts with a barrier, so the stages start together and the step is one
// window for all of them, as in the papers' figures: its length is the makespan (the slowest
// stage's action list) and a stage's idle fraction is 1 - its compute / the makespan. Without
// the barrier a stage that finished early would start the next step's list early and count
// the other stage's tail as its own wait.
//
// Printed per (schedule, M): the theory, each stage's median idle fraction over the timed
// steps, their mean, and the relative excess of the mean over the theory; then the idle
// fraction of the bottleneck, the stage that computed longest (1 - its compute / the
// makespan), and its excess. The mean counts imbalance too: a stage that computes 3% less
// than the other waits for it at every message. The bottleneck's idle is the schedule's bubble
// alone (the papers' (makespan - bottleneck's compute) / makespan). --breakdown adds,
// per stage and for the last step, where its time went (Pipe::trace()'s spans, ms): compute
// (forwards and backwards), waiting in receives, posting sends, and the rest (between spans,
// and after its list ended until the makespan did).
#include <algorithm>
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
#include "tensor/ops.h"
#include "tensor/parallel.h"

using namespace tessera;

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

constexpr int kFields = 6;  // per stage: idle, step ms, compute, recv, send, rest (ms)

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
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

// This rank's mean forward and backward time of one chunk of one micro-batch (ms), from the
// executor's spans of the last step.
pipeline::StageTimes compute_times(const std::vector<pipeline::Span>& spans) {
  double forward = 0, backward = 0;
  int forwards = 0, backwards = 0;
  for (const pipeline::Span& span : spans) {
    if (span.reduction) continue;
    const double ms = (span.end - span.start) * 1e3;
    if (span.action.kind == pipeline::ActionKind::kForward) forward += ms, ++forwards;
    if (span.action.kind == pipeline::ActionKind::kBackward) backward += ms, ++backwards;
  }
  return {forward / std::max(forwards, 1), backward / std::max(backwards, 1)};
}

// The latency of the messages a stage sat waiting for: from the sender posting it to the
// receiver holding it (recv end - send start), for each receive that began before its send.
// The n-th activation (gradient) a rank sends goes to the next (previous) rank and is the n-th
// that rank receives (MPI's order on one tag). Collective over the pipeline (`world`).
std::vector<double> waited_hop_ms(const std::vector<pipeline::Span>& mine, dist::ProcessGroup& world) {
  const std::vector<std::vector<pipeline::Span>> all = pipeline::gather_trace(mine, world);
  const int K = static_cast<int>(all.size());
  const auto of_kind = [](const std::vector<pipeline::Span>& spans, pipeline::ActionKind kind) {
    std::vector<pipeline::Span> out;
    for (const pipeline::Span& span : spans) {
      if (!span.reduction && span.action.kind == kind) out.push_back(span);
    }
    return out;
  };
  std::vector<double> hops;
  for (int r = 0; r < K; ++r) {
    for (const bool activation : {true, false}) {
      const int sender = activation ? (r + K - 1) % K : (r + 1) % K;
      const auto sends = of_kind(all[sender], activation ? pipeline::ActionKind::kSendActivation
                                                          : pipeline::ActionKind::kSendGradient);
      const auto recvs = of_kind(all[r], activation ? pipeline::ActionKind::kRecvActivation
                                                     : pipeline::ActionKind::kRecvGradient);
      for (size_t n = 0; n < std::min(sends.size(), recvs.size()); ++n) {
        if (recvs[n].start <= sends[n].start) hops.push_back((recvs[n].end - sends[n].start) * 1e3);
      }
    }
  }
  return hops;
}

}  // namespace

int main(int argc, char** argv) {
  auto world = dist::init(&argc, &argv);
  int64_t width = 1024, batch = 2048;
  int layers = 16, steps = 7;
  std::string microbatches = "1,2,4,8,16", schedules = "gpipe,1f1b,interleaved";
  bool breakdown = false;
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
    } else {
      if (world->rank() == 0) {
        std::fprintf(stderr, "pipeline_bench: unknown flag %s (--width=N --layers=N --batch=N "
                     "--steps=N --microbatches=1,2,4 --schedules=gpipe,1f1b,interleaved)\n", argv[i]);
      }
      return 2;
    }
  }
  set_num_threads(1);
  const int K = world->size();
  if (world->rank() == 0) {
    std::printf("pipeline_bench: K = %d stages (one rank each, 1 thread), %d x Linear(%lld) + "
                "ReLU, batch %lld, median of %d steps\n", K, layers,
                static_cast<long long>(width), static_cast<long long>(batch), steps);
    std::printf("%-12s %4s %7s | %-16s | %-16s | %-20s | %s\n", "", "", "", "measured idle",
                "model idle", "measured - model", "");
    std::printf("%-12s %4s %7s | %7s %8s | %7s %8s | %9s %10s | %8s\n", "schedule", "M", "theory",
                "mean", "bottlen.", "mean", "bottlen.", "mean", "bottlen.", "step ms");
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
      const auto lists = pipeline::make_schedules(pipeline::parse_schedule(schedule), K, M, v);
      std::vector<double> idle, step_ms, bottleneck, model_mean, model_bottleneck;
      std::vector<pipeline::StageTimes> last_times;
      for (int i = 0; i < steps + 1; ++i) {
        for (const Variable& p : pipe.parameters()) p.zero_grad();
        world->barrier()->wait();
        pipe.train_step(x, y);
        if (i == 0) continue;  // warm-up
        // The makespan: every stage's list started at the barrier; the last one to end ends it.
        // The bottleneck: the stage that computed longest.
        Tensor times = from_vector<double>({pipe.stats().step_seconds, pipe.stats().busy_seconds}, {2});
        world->all_reduce(times, dist::ReduceOp::kMax)->wait();
        const double makespan = times.to_vector<double>()[0];
        const double most_busy = times.to_vector<double>()[1];
        idle.push_back(1.0 - pipe.stats().busy_seconds / makespan);
        bottleneck.push_back(1.0 - most_busy / makespan);
        step_ms.push_back(makespan * 1e3);
        // The timing model with this step's measured stage times (free messages, no jitter).
        const pipeline::StageTimes mine = compute_times(pipe.trace());
        Tensor all_times = empty({2 * K}, kF64);
        world->all_gather(from_vector<double>({mine.forward, mine.backward}, {2}), all_times)->wait();
        const std::vector<double> t = all_times.to_vector<double>();
        std::vector<pipeline::StageTimes> stage_times;
        for (int s = 0; s < K; ++s) stage_times.push_back({t[2 * s], t[2 * s + 1]});
        const pipeline::TimedStep model = pipeline::play_timed(lists, v, stage_times);
        last_times = stage_times;
        model_mean.push_back(model.mean_idle());
        model_bottleneck.push_back(model.bottleneck_idle());
      }
      // The last step's time by kind of span: compute, recv, send, the rest.
      double compute = 0, recv = 0, send = 0;
      for (const pipeline::Span& span : pipe.trace()) {
        const double ms = (span.end - span.start) * 1e3;
        const std::string category = pipeline::span_category(span);
        if (category == "forward" || category == "backward") compute += ms;
        if (category == "recv") recv += ms;
        if (category == "send") send += ms;
      }
      const double rest = step_ms.back() - compute - recv - send;
      const std::vector<double> hops = waited_hop_ms(pipe.trace(), *world);
      Tensor mine = from_vector<double>({median(idle), median(step_ms), compute, recv, send, rest},
                                        {kFields});
      Tensor all = empty({kFields * K}, kF64);
      world->all_gather(mine, all)->wait();
      if (world->rank() != 0) continue;
      const std::vector<double> b = all.to_vector<double>();
      std::vector<double> a;
      for (int s = 0; s < K; ++s) a.insert(a.end(), {b[kFields * s], b[kFields * s + 1]});
      double mean = 0, slowest_step = 0;
      for (int s = 0; s < K; ++s) {
        mean += a[2 * s] / K;
        slowest_step = std::max(slowest_step, a[2 * s + 1]);
      }
      const double theory = pipeline::bubble_fraction(K, M, v);
      const double bubble = median(bottleneck);
      const double modeled_mean = median(model_mean), modeled_bubble = median(model_bottleneck);
      const auto percent_of_theory = [&](double d) { return 100.0 * d / theory; };
      std::printf("%-12s %4d %7.3f | %7.3f %8.3f | %7.3f %8.3f | %+8.0f%% %+9.0f%% | %8.1f\n",
                  schedule.c_str(), M, theory, mean, bubble, modeled_mean, modeled_bubble,
                  percent_of_theory(mean - modeled_mean), percent_of_theory(bubble - modeled_bubble),
                  slowest_step);
      if (breakdown) {
        std::printf("    idle per stage:");
        for (int s = 0; s < K; ++s) std::printf(" %.3f", a[2 * s]);
        std::printf("; last step's forward/backward of one chunk (ms):");
        for (const pipeline::StageTimes& t : last_times) std::printf(" %.2f/%.2f", t.forward, t.backward);
        std::printf("\n");
        if (!hops.empty()) {
          std::printf("    last step: %zu messages waited for, latency (ms) median %.3f, max %.3f\n",
                      hops.size(), median(hops), *std::max_element(hops.begin(), hops.end()));
        }
        for (int s = 0; s < K; ++s) {
          std::printf("    stage %d, last step (ms): compute %.1f, recv %.1f, send %.1f, rest %.1f\n", s,
                      b[kFields * s + 2], b[kFields * s + 3], b[kFields * s + 4], b[kFields * s + 5]);
        }
      }
      std::fflush(stdout);
    }
  }
  return 0;
}
