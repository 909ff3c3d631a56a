// DDP step benchmark, run under mpirun: per-rank step time and how much of the gradient
// all-reduce is hidden behind backward.
//
//   bazel build -c opt --config=native //tools/bench:ddp_bench
//   mpirun -np 1 bazel-bin/tools/bench/ddp_bench --model=resnet20 --threads=1
//   mpirun -np 2 --oversubscribe bazel-bin/tools/bench/ddp_bench --model=resnet20 --threads=1
//
// For each step kind it reports the median over --steps steps after warm-up:
//   ddp      forward + backward (with bucketed all-reduce) + SGD step, per rank
//   no_sync  the same without communication (gradients stay local)
//   comm     the same buckets all-reduced back to back with nothing to overlap
// exposed = ddp - no_sync is what communication added to the step; hidden = 1 - exposed / comm
// is the share of the all-reduce time that overlapped with backward.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "autograd/functions.h"
#include "dist/ddp.h"
#include "dist/environment.h"
#include "models/resnet.h"
#include "models/simple.h"
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
    auto comm_only = [&] {
      world->barrier()->wait();
      const double start = now_ms();
      std::vector<std::shared_ptr<dist::Work>> works;
      for (const dist::Bucket& b : ddp.buckets()) works.push_back(world->all_reduce(b.buffer));
      for (auto& w : works) w->wait();
      return now_ms() - start;
    };
    const int warmup = resnet ? 2 : 20, n = resnet ? steps : 20 * steps;
    std::vector<double> synced, local, comm;
    for (int i = 0; i < warmup + n; ++i) {
      const double a = step(true), b = step(false), c = comm_only();
      if (i >= warmup) {
        synced.push_back(a);
        local.push_back(b);
        comm.push_back(c);
      }
    }
    const double ddp_ms = median(synced), local_ms = median(local), comm_ms = median(comm);
    const double exposed = std::max(0.0, ddp_ms - local_ms);
    if (world->rank() == 0) {
      std::printf("%s batch %lld/rank, %d rank(s) x %d thread(s), %zu buckets, %lld parameters\n",
                  model_name.c_str(), static_cast<long long>(batch), world->size(), threads,
                  ddp.buckets().size(), static_cast<long long>(model->num_parameters()));
      std::printf("  ddp step      %9.3f ms (median of %d)\n", ddp_ms, n);
      std::printf("  no_sync step  %9.3f ms\n", local_ms);
      std::printf("  comm only     %9.3f ms\n", comm_ms);
      if (world->size() > 1 && comm_ms > 0) {
        std::printf("  exposed comm  %9.3f ms  -> %.0f%% of the all-reduce hidden behind backward\n",
                    exposed, 100.0 * std::max(0.0, 1.0 - exposed / comm_ms));
      }
    }
    dist::finalize();
    return 0;
  });
}
