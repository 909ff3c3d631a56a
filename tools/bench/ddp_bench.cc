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
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
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

using namespace tessera;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double now_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_name = "resnet20";
  int steps = 10, threads = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--model=", 8) == 0) model_name = argv[i] + 8;
    else if (std::strncmp(argv[i], "--steps=", 8) == 0) steps = std::max(3, std::atoi(argv[i] + 8));
    else if (std::strncmp(argv[i], "--threads=", 10) == 0) threads = std::max(1, std::atoi(argv[i] + 10));
    else {
      std::fprintf(stderr, "ddp_bench: unknown flag %s (--model=logistic|mlp|resnet20 --steps=N --threads=N)\n", argv[i]);
      return 2;
    }
  }
  auto world = dist::init(&argc, &argv);
  return dist::run_or_abort([&] {
    set_num_threads(threads);
    manual_seed(0);
    const bool resnet = model_name == "resnet20";
    auto model = resnet ? models::ResNet20(1, 10)
                        : model_name == "mlp" ? models::MLP() : models::LogisticRegression();
    const int64_t batch = resnet ? 128 : 64;
    dist::DistributedDataParallel ddp(model, world);
    optim::SGD opt(model->parameters(), optim::SGDOptions(0.01).momentum(0.9));
    const Tensor x = randn({batch, 1, 28, 28});
    const Tensor y = arange(batch, kI64);
    const Tensor labels = sub(y, mul(div(y, 10.0).to(kI64), 10.0)).to(kI64);
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

    const int warmup = resnet ? 2 : 20, n = resnet ? steps : 20 * steps;
    std::vector<double> synced, local, comm, exposed_ms;
    for (int i = 0; i < warmup + n; ++i) {
      const double a = step(true);
      const dist::ReductionTiming t = ddp.last_reduction();
      const double b = step(false);
      if (i >= warmup) {
        synced.push_back(a);
        local.push_back(b);
        comm.push_back(1e3 * t.communication_seconds());
        exposed_ms.push_back(1e3 * t.exposed_seconds());
      }
    }
    // The train tool's per-step checks: the NaN guard's gradient norm (over the last step's
    // gradients) and its one-number all-reduce.
    std::vector<double> guard;
    for (int i = 0; i < 200; ++i) {
      const double start = now_ms();
      const double norm = optim::grad_norm(model->parameters());
      dist::all_reduce_scalar(std::isfinite(norm) ? 0.0 : 1.0, *world, dist::ReduceOp::kMax);
      guard.push_back(now_ms() - start);
    }
    const double ddp_ms = median(synced), local_ms = median(local), comm_ms = median(comm);
    const double exposed = median(exposed_ms);
    if (world->rank() == 0) {
      std::printf("%s batch %lld/rank, %d rank(s) x %d thread(s), %zu buckets, %lld parameters\n",
                  model_name.c_str(), static_cast<long long>(batch), world->size(), threads,
                  ddp.buckets().size(), static_cast<long long>(model->num_parameters()));
      std::printf("  ddp step      %9.3f ms (median of %d)\n", ddp_ms, n);
      std::printf("  no_sync step  %9.3f ms\n", local_ms);
      std::printf("  all-reduce    %9.3f ms (on the communication thread)\n", comm_ms);
      std::printf("  NaN guard     %9.3f ms per step (gradient norm, one f64 all-reduced: %.2f%% of "
                  "the ddp step)\n",
                  median(guard), 100.0 * median(guard) / ddp_ms);
      if (world->size() > 1 && comm_ms > 0) {
        std::printf("  exposed comm  %9.3f ms  -> %.0f%% of the all-reduce hidden behind backward\n",
                    exposed, 100.0 * std::max(0.0, 1.0 - exposed / comm_ms));
      }
    }
    dist::finalize();
    return 0;
  });
}
