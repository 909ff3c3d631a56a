// Tensor-parallel classifier benchmark (TorchShard's ResNet-50 figure), run under mpirun: the
// memory a rank holds for parameters, gradients, optimizer state and the head's logits, and
// the step time, for data parallelism with and without a class-parallel head.
//
//   bazel build -c opt --config=native //tools/bench:tensor_parallel_bench
//   for mode in ddp ddp_tp zero1 zero1_tp; do
//     mpirun -np 2 --oversubscribe bazel-bin/tools/bench/tensor_parallel_bench --mode=$mode
//   done
//
// Modes (N ranks): ddp       DDP over all N, the whole model on every rank;
//                  ddp_tp    the classifier column-parallel over T = N (or --tensor-parallel),
//                            class-parallel cross-entropy, DDP over the N/T replicas;
//                  zero1     ZeRO-1 over all N (optimizer state sharded);
//                  zero1_tp  the class-parallel head and ZeRO-1 over the replicas.
// Defaults: ResNet-50 with 100,000 classes, batch 8 of 3x224x224 synthetic images, SGD with
// momentum, 1 thread per rank, 3 timed steps after one warm-up.
//
// Memory comes from the counting allocator (tensor/allocator.h): the bytes held after the model
// is built (parameters), after the optimizer's first step (adds gradients, DDP's buckets and
// the optimizer state), and the peak of a step. Beside them, the formulas: parameters and
// gradients 4 psi_rank each, SGD momentum 4 psi_rank (ZeRO-1: 4 psi_rank / D), logits
// 4 B C / T. The tensor-parallel group's bytes per step are printed beside their formula:
// 2 (T-1)/T x 4 (B + 3B + B * in) (the row maxima, the three sums, and the backward all-reduce
// of the head's input gradient).
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "autograd/functions.h"
#include "dist/ddp/ddp.h"
#include "dist/environment.h"
#include "dist/tensor_parallel/class_parallel_cross_entropy.h"
#include "dist/tensor_parallel/column_parallel_linear.h"
#include "dist/tensor_parallel/parallelize.h"
#include "dist/topology.h"
#include "dist/zero/zero_optimizer.h"
#include "models/resnet.h"
#include "optim/sgd.h"
#include "tensor/allocator.h"
#include "tensor/ops.h"
#include "tensor/parallel.h"
#include "tools/bench/bench_clock.h"
#include "tools/bench/bench_flags.h"
#include "tools/bench/median.h"

using namespace tessera;
using bench::now_ms;  // the wall clock: this bench has no --clock
namespace tp = tessera::dist::tensor_parallel;

namespace {

struct Flags {
  std::string mode = "ddp_tp";
  int depth = 50, image = 224, steps = 3, threads = 1, tensor_parallel = 0;
  int64_t classes = 100000, batch = 8;
};

Flags parse(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const auto value = [&](const char* flag) { return bench::flag_value(argv[i], flag); };
    // A whole number of at least `min` for `flag`, or the bench ends saying why.
    const auto number = [&](const char* flag, const char* text, auto min, auto* out) {
      if (!bench::parse_number("tensor_parallel_bench", flag, text, min, out)) std::exit(2);
    };
    if (const char* v = value("--mode=")) f.mode = v;
    else if (const char* v = value("--depth=")) number("--depth=", v, 1, &f.depth);
    else if (const char* v = value("--image=")) number("--image=", v, 1, &f.image);
    else if (const char* v = value("--steps=")) number("--steps=", v, 1, &f.steps);
    else if (const char* v = value("--threads=")) number("--threads=", v, 1, &f.threads);
    else if (const char* v = value("--tensor-parallel=")) {
      number("--tensor-parallel=", v, 0, &f.tensor_parallel);  // 0: every rank
    }
    else if (const char* v = value("--classes=")) number("--classes=", v, int64_t{1}, &f.classes);
    else if (const char* v = value("--batch=")) number("--batch=", v, int64_t{1}, &f.batch);
    else {
      bench::print_unknown_flag("tensor_parallel_bench", argv[i],
                                "--mode=ddp|ddp_tp|zero1|zero1_tp --depth=18|34|50 --classes=N "
                                "--batch=N --image=N --steps=N --threads=N --tensor-parallel=T");
      std::exit(2);
    }
  }
  if (f.mode != "ddp" && f.mode != "ddp_tp" && f.mode != "zero1" && f.mode != "zero1_tp") {
    std::fprintf(stderr, "tensor_parallel_bench: --mode must be ddp|ddp_tp|zero1|zero1_tp, got %s\n",
                 f.mode.c_str());
    std::exit(2);
  }
  return f;
}

int64_t current_bytes() { return memory_stats(Device::cpu()).current_bytes; }
double mb(int64_t bytes) { return bytes / 1048576.0; }

int run(const Flags& f, const std::shared_ptr<dist::ProcessGroup>& world) {
  set_num_threads(f.threads);
  const bool tensor_parallel = f.mode == "ddp_tp" || f.mode == "zero1_tp";
  const int t = tensor_parallel ? (f.tensor_parallel > 0 ? f.tensor_parallel : world->size()) : 1;
  dist::Topology topology(world, 1, t);
  const auto& dp = topology.data_parallel_group();

  const int64_t base = current_bytes();
  manual_seed(0);
  auto model = models::ResNetImageNet(f.depth, 3, f.classes);
  int64_t head_in = 0, classes_here = f.classes;
  std::function<Variable(const Variable&, const Tensor&)> loss_fn =
      [](const Variable& out, const Tensor& y) { return cross_entropy(out, y); };
  if (tensor_parallel) {
    const auto head = std::dynamic_pointer_cast<tp::ColumnParallelLinear>(tp::parallelize_module(
        *model, topology.tensor_parallel_group(),
        {{tp::last_linear_name(*model), tp::Style::kClassParallelHead}})[0]);
    head_in = head->in_features();
    classes_here = head->output_slice().length;
    auto ce = std::make_shared<tp::ClassParallelCrossEntropy>(
        topology.tensor_parallel_group(), head->output_slice(), head->out_features());
    loss_fn = [ce](const Variable& out, const Tensor& y) { return (*ce)(out, y); };
  }
  int64_t psi = 0;
  for (const Variable& p : model->parameters()) psi += p.numel();
  const int64_t parameter_bytes = current_bytes() - base;

  std::unique_ptr<dist::DistributedDataParallel> ddp;
  std::unique_ptr<optim::Optimizer> opt;
  const optim::SGDOptions sgd = optim::SGDOptions(0.01).momentum(0.9);
  if (f.mode == "ddp" || f.mode == "ddp_tp") {
    ddp = std::make_unique<dist::DistributedDataParallel>(model, dp);
    opt = std::make_unique<optim::SGD>(model->parameters(), sgd);
  } else {
    opt = std::make_unique<dist::ZeroRedundancyOptimizer>(model->parameters(), dp,
                                                          dist::zero_factory<optim::SGD>(sgd));
  }
  Generator gen(1 + topology.replica());  // one batch per replica, the same on its TP ranks
  const Tensor x = randn({f.batch, 3, f.image, f.image}, kF32, &gen);
  std::vector<int64_t> labels;
  for (int64_t i = 0; i < f.batch; ++i) labels.push_back((i * 7919) % f.classes);
  const Tensor y = from_vector<int64_t>(labels, {f.batch});

  std::vector<double> times;
  int64_t after_step = 0, peak = 0, tp_bytes = 0;
  for (int step = 0; step <= f.steps; ++step) {
    reset_peak(Device::cpu());
    const int64_t tp_before = topology.tensor_parallel_group()->ledger().total_bytes();
    world->barrier()->wait();
    const double start = now_ms();
    const Variable out = ddp ? ddp->forward(Variable(x)) : model->forward(Variable(x));
    Variable loss = loss_fn(out, y);
    opt->zero_grad();
    loss.backward();
    opt->step();
    const double ms = now_ms() - start;
    if (step > 0) times.push_back(ms);  // step 0 warms up (and allocates the state)
    after_step = current_bytes() - base;
    peak = std::max(peak, memory_stats(Device::cpu()).peak_bytes - base);
    tp_bytes = topology.tensor_parallel_group()->ledger().total_bytes() - tp_before;
  }
  const double step_ms = bench::upper_median(times);
  const int64_t state_bytes = opt->state_bytes();
  const int64_t logits_bytes = f.batch * classes_here * 4;
  const int d = topology.data_parallel_size();
  const int64_t state_formula = f.mode.rfind("zero1", 0) == 0 ? 4 * psi / d : 4 * psi;
  const int64_t tp_formula =
      t > 1 ? 2 * (t - 1) * 4 * (f.batch + 3 * f.batch + f.batch * head_in) / t : 0;

  // Rank 0's figures (the ranks of a mode hold the same amounts, up to uneven slices).
  if (world->rank() == 0) {
    std::printf("ResNet-%d, %lld classes, batch %lld of 3x%dx%d, %d ranks = %d tensor-parallel x "
                "%d data-parallel, %s, %d thread(s) per rank\n",
                f.depth, (long long)f.classes, (long long)f.batch, f.image, f.image,
                world->size(), t, d, f.mode.c_str(), f.threads);
    std::printf("  parameters on this rank  %9.1f MB  (formula 4 psi_rank = %.1f MB, psi_rank = "
                "%lld)\n", mb(parameter_bytes), mb(4 * psi), (long long)psi);
    std::printf("  optimizer state          %9.1f MB  (formula %s = %.1f MB)\n", mb(state_bytes),
                f.mode.rfind("zero1", 0) == 0 ? "4 psi_rank / D" : "4 psi_rank",
                mb(state_formula));
    std::printf("  head logits              %9.1f MB  (4 B C / T = %.1f MB)\n", mb(logits_bytes),
                mb(4 * f.batch * f.classes / t));
    std::printf("  held after a step        %9.1f MB  (parameters + gradients + buckets + state)\n",
                mb(after_step));
    std::printf("  peak during a step       %9.1f MB\n", mb(peak));
    std::printf("  tensor-parallel bytes    %9lld per step (formula 2(T-1)/T x 4(B + 3B + B in) = "
                "%lld)\n", (long long)tp_bytes, (long long)tp_formula);
    std::printf("  step                     %9.0f ms (median of %d)\n", step_ms, f.steps);
    std::printf("{\"mode\": \"%s\", \"ranks\": %d, \"tensor_parallel\": %d, \"parameter_mb\": %.1f, "
                "\"state_mb\": %.1f, \"logits_mb\": %.2f, \"after_step_mb\": %.1f, \"peak_mb\": "
                "%.1f, \"tp_bytes_per_step\": %lld, \"tp_bytes_formula\": %lld, \"step_ms\": %.0f}\n",
                f.mode.c_str(), world->size(), t, mb(parameter_bytes), mb(state_bytes),
                mb(logits_bytes), mb(after_step), mb(peak), (long long)tp_bytes,
                (long long)tp_formula, step_ms);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Flags f = parse(argc, argv);
  auto world = dist::init(&argc, &argv);
  const int code = dist::run_or_abort([&] { return run(f, world); });
  dist::finalize();
  return code;
}
