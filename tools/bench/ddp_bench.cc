// DDP step benchmark, run under mpirun: per-rank step time and how much of the gradient
// all-reduce is hidden behind backward.
//
//   bazel build -c opt --config=native //tools/bench:ddp_bench
//   mpirun -np 1 bazel-bin/tools/bench/ddp_bench --model=resnet20 --threads=1
//   mpirun -np 2 --oversubscribe bazel-bin/tools/bench/ddp_bench --model=resnet20 --threads=1
//
// It reports medians over --steps steps after warm-up:
//   ddp step      forward + backward (with bucketed all-reduce) + SGD step, per rank
//   no_sync step  the same without communication (gradients stay local)
//   all-reduce    time the buckets' all-reduces took on the communication thread during backward
//   exposed       time from the last gradient of backward to the averaged gradients being ready
//   NaN guard     the train tool's per-step check: the local gradient norm, then one f64
//                 all-reduced (median of 200)
// hidden = 1 - exposed / all-reduce is the share of the communication that overlapped with
// backward (DDP's timestamps, measured within each step, so step-to-step noise cancels).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "autograd/functions.h"
#include "dist/ddp/ddp.h"
#include "dist/environment.h"
#include "dist/reduce_scalar.h"
#include "models/resnet.h"
#include "models/simple.h"
#include "optim/clip_grad.h"
#include "optim/sgd.h"
#include "tensor/ops.h"
#include "tensor/parallel.h"
#include "tools/bench/bench_clock.h"
#include "tools/bench/bench_flags.h"
#include "tools/bench/median.h"

using namespace tessera;
using bench::now_ms;  // the wall clock: this bench has no --clock
using bench::upper_median;

namespace {

struct Flags {
  std::string model = "resnet20";  // logistic, mlp or resnet20
  int steps = 10;                  // timed steps of resnet20 (20x as many of the small models)
  int threads = 1;
};

// False, with the reason on stderr, for a flag it does not know.
bool parse_flags(int argc, char** argv, Flags* flags) {
  for (int i = 1; i < argc; ++i) {
    const char* v;
    if ((v = bench::flag_value(argv[i], "--model="))) {
      flags->model = v;
      if (flags->model != "logistic" && flags->model != "mlp" && flags->model != "resnet20") {
        std::fprintf(stderr, "ddp_bench: --model must be logistic, mlp or resnet20, got %s\n", v);
        return false;
      }
    } else if ((v = bench::flag_value(argv[i], "--steps="))) {
      // At least 3, as before this parser checked: medians over a few steps.
      if (!bench::parse_number("ddp_bench", "--steps=", v, 3, &flags->steps)) return false;
    } else if ((v = bench::flag_value(argv[i], "--threads="))) {
      if (!bench::parse_number("ddp_bench", "--threads=", v, 1, &flags->threads)) return false;
    } else {
      bench::print_unknown_flag("ddp_bench", argv[i],
                                "--model=logistic|mlp|resnet20 --steps=N --threads=N");
      return false;
    }
  }
  return true;
}

// The model --model names, seeded alike on every rank,
// with its batch per rank (as train_bench's cases) and its step counts: the small models' steps
// are short, so they run 20x as many.
struct Workload {
  std::shared_ptr<nn::Sequential> model;
  int64_t batch;
  Tensor x, labels;
  int warmup, steps;
};

Workload workload(const Flags& flags) {
  manual_seed(0);
  const bool resnet = flags.model == "resnet20";
  Workload w;
  w.model = resnet ? models::ResNet20(1, 10)
                   : flags.model == "mlp" ? models::MLP() : models::LogisticRegression();
  w.batch = resnet ? 128 : 64;
  w.x = randn({w.batch, 1, 28, 28});
  const Tensor y = arange(w.batch, kI64);
  w.labels = sub(y, mul(div(y, 10.0).to(kI64), 10.0)).to(kI64);  // y mod 10
  w.warmup = resnet ? 2 : 20;
  w.steps = resnet ? flags.steps : 20 * flags.steps;
  return w;
}

// Per timed step, ms: the DDP step, the same step under no_sync, and from DDP's timestamps of
// the synced step, its buckets' all-reduces and the part of them backward did not hide.
struct StepTimes {
  std::vector<double> synced, local, comm, exposed;
};

// Steps with and without communication alternate, so machine noise falls on both alike.
StepTimes time_steps(dist::DistributedDataParallel& ddp, optim::SGD& opt, const Tensor& x,
                     const Tensor& labels, int warmup, int n) {
  auto step = [&](bool sync) {
    const double start = now_ms();
    opt.zero_grad();
    if (sync) {
      cross_entropy(ddp.forward(Variable(x)), labels).backward();
    } else {
      auto guard = ddp.no_sync();
      cross_entropy(ddp.forward(Variable(x)), labels).backward();
    }
    opt.step();
    return now_ms() - start;
  };
  StepTimes times;
  for (int i = 0; i < warmup + n; ++i) {
    const double a = step(true);
    const dist::ReductionTiming t = ddp.last_reduction();
    const double b = step(false);
    if (i >= warmup) {
      times.synced.push_back(a);
      times.local.push_back(b);
      times.comm.push_back(1e3 * t.communication_seconds());
      times.exposed.push_back(1e3 * t.exposed_seconds());
    }
  }
  return times;
}

// The train tool's per-step checks: the NaN guard's gradient norm (over the last step's
// gradients) and its one-number all-reduce. ms, per check.
std::vector<double> time_nan_guard(const std::shared_ptr<nn::Sequential>& model,
                                   dist::ProcessGroup& world) {
  std::vector<double> guard;
  for (int i = 0; i < 200; ++i) {
    const double start = now_ms();
    const double norm = optim::grad_norm(model->parameters());
    dist::all_reduce_scalar(std::isfinite(norm) ? 0.0 : 1.0, world, dist::ReduceOp::kMax);
    guard.push_back(now_ms() - start);
  }
  return guard;
}

void print_report(const Flags& flags, int64_t batch, int ranks, size_t buckets,
                  int64_t parameters, const StepTimes& times, const std::vector<double>& guard) {
  const double ddp_ms = upper_median(times.synced), local_ms = upper_median(times.local),
               comm_ms = upper_median(times.comm), exposed = upper_median(times.exposed);
  std::printf("%s batch %lld/rank, %d rank(s) x %d thread(s), %zu buckets, %lld parameters\n",
              flags.model.c_str(), static_cast<long long>(batch), ranks, flags.threads, buckets,
              static_cast<long long>(parameters));
  std::printf("  ddp step      %9.3f ms (median of %d)\n", ddp_ms,
              static_cast<int>(times.synced.size()));
  std::printf("  no_sync step  %9.3f ms\n", local_ms);
  std::printf("  all-reduce    %9.3f ms (on the communication thread)\n", comm_ms);
  std::printf("  NaN guard     %9.3f ms per step (gradient norm, one f64 all-reduced: %.2f%% of "
              "the ddp step)\n",
              upper_median(guard), 100.0 * upper_median(guard) / ddp_ms);
  if (ranks > 1 && comm_ms > 0) {
    std::printf("  exposed comm  %9.3f ms  -> %.0f%% of the all-reduce hidden behind backward\n",
                exposed, 100.0 * std::max(0.0, 1.0 - exposed / comm_ms));
  }
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  if (!parse_flags(argc, argv, &flags)) return 2;
  auto world = dist::init(&argc, &argv);
  return dist::run_or_abort([&] {
    set_num_threads(flags.threads);
    const Workload w = workload(flags);
    dist::DistributedDataParallel ddp(w.model, world);
    optim::SGD opt(w.model->parameters(), optim::SGDOptions(0.01).momentum(0.9));
    const StepTimes times = time_steps(ddp, opt, w.x, w.labels, w.warmup, w.steps);
    const std::vector<double> guard = time_nan_guard(w.model, *world);
    if (world->rank() == 0) {
      print_report(flags, w.batch, world->size(), ddp.buckets().size(),
                   w.model->num_parameters(), times, guard);
    }
    dist::finalize();
    return 0;
  });
}
