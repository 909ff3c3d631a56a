// train: trains a model on Fashion-MNIST (or synthetic images) with tessera and reports test
// accuracy, throughput and memory; or a GPT on text, reporting validation loss and perplexity. See flag_table.h for the flags (--help lists them) and flags.cc
// for the per-model defaults.
//
//   bazel-bin/tools/train --model=logistic                               one process
//   mpirun -np 2 bazel-bin/tools/train --model=logistic --strategy=zero1  data parallel
//   mpirun -np 2 bazel-bin/tools/train --model=mlp --strategy=pipeline    two pipeline stages
//   mpirun -np 4 bazel-bin/tools/train --model=mlp --tensor-parallel=2 --strategy=ddp
//                                                         tensor x data parallel
//   bazel-bin/tools/train --model=mlp --amp=bf16                         mixed precision
//   bazel-bin/tools/train --model=gpt-nano --data=text --sample=200      a GPT on the fortunes
//
// Output (rank 0): a progress bar (plain lines when stdout is not a terminal), one line per
// epoch, JSON lines per step and per epoch to --metrics (metrics.h), and as the last line on
// stdout one JSON object with the run's figures. Exit codes: 0 done, 1 runtime error (an error
// on any rank ends the whole job), 2 bad flags.
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>

#include "dist/environment.h"
#include "dist/reduce_scalar.h"
#include "nn/loss.h"
#include "tensor/accelerator.h"
#include "tensor/parallel.h"
#include "tensor/random.h"
#include "tools/train/checkpoints.h"
#include "tools/train/context.h"
#include "tools/train/context_parallel.h"
#include "tools/train/data.h"
#include "tools/train/flag_rules.h"
#include "tools/train/flags.h"
#include "tools/train/guards.h"
#include "tools/train/language_model.h"
#include "tools/train/launcher_rank.h"
#include "tools/train/model.h"
#include "tools/train/output_paths.h"
#include "tools/train/precision.h"
#include "tools/train/run_page.h"
#include "tools/train/run_report.h"
#include "tools/train/save_model.h"
#include "tools/train/strategy.h"
#include "tools/train/tensor_parallel.h"
#include "tools/train/tracing.h"
#include "tools/train/train_loop.h"

namespace tessera {
namespace train {
namespace {

// The device this rank trains on: --device=cuda picks GPU (rank mod GPU count).
// A device this machine lacks is a flag that cannot work here: FlagError (exit 2).
Device resolve_device(const Config& c, int rank) {
  if (c.device == "cpu") return Device::cpu();
  if (!cuda_is_available()) throw FlagError("--device=" + c.device + ": " + cuda_unavailable_reason());
  if (c.device == "cuda") return Device::cuda(rank % device_count(DeviceType::kCUDA));
  return Device::parse(c.device);
}

// How the model is parallelized (strategy.h, tensor_parallel.h), with the head that reads its
// output: the one place the run's parallelism is chosen. Raises FlagError for options the
// library rejects.
struct Parallelized {
  std::unique_ptr<Strategy> strategy;
  std::optional<dist::Topology> topology;  // --tensor-parallel
  Head head;
  TensorParallelFigures figures;
};
void build_strategy(const Config& c, std::shared_ptr<nn::Sequential> model,
                    std::shared_ptr<dist::ProcessGroup> world, MixedPrecision& precision,
                    Device device, Parallelized& out) {
  out.head = language_model(c) ? language_model_head() : plain_head(c);
  // The grid of ranks (dist::Topology): tensor-parallel groups inside context-parallel ones,
  // those inside pipeline stages (P x C x T x D) or data-parallel replicas alone.
  std::optional<dist::Topology> grid;
  if (c.tensor_parallel > 1 || c.context_parallel > 1) {
    const int stages =
        c.strategy == "pipeline"
            ? pipeline_stages(c, world->size() / (c.tensor_parallel * c.context_parallel))
            : 1;
    grid.emplace(world, stages, c.tensor_parallel, c.context_parallel);
  }
  if (c.tensor_parallel > 1) {
    out.topology = grid;
    out.head = split_layers(c, *model, *grid, &out.figures);
  }
  std::optional<ContextParallelLayout> sequences;  // --context-parallel
  if (c.context_parallel > 1) {
    // After the tensor-parallel split: the ring then runs over this rank's heads.
    sequences = make_context_parallel_layout(*grid, c.context_parallel_algorithm);
    split_sequences(*model, *sequences);
  }
  // The strategies that place their groups on the grid: tensor parallelism's, and the pipeline's
  // (its stages, and the data-parallel group of a stage holding D x C ranks under context
  // parallelism). DDP and ZeRO beside context parallelism alone run over the world, which is
  // the D x C ranks.
  const bool on_grid = c.tensor_parallel > 1 || (grid && c.strategy == "pipeline");
  out.strategy = make_strategy(c, model, world, on_grid ? &*grid : nullptr, out.head.loss,
                               precision, device);
  if (sequences) {
    out.strategy = context_parallel_strategy(c, std::move(out.strategy), model, *sequences);
  }
  if (out.topology && c.strategy == "pipeline") {
    // 3D: this rank holds its stage's slices only.
    out.figures.parameter_bytes = 0;
    for (const Variable& p : out.strategy->model_state_parameters()) {
      out.figures.parameter_bytes += p.data().nbytes();
    }
  }
}

// One training run, the same steps on every rank (most are collective): build the data and the
// model, check the ranks agree, parallelize, resume, train, report. Returns the exit code.
int run(const Config& given, std::shared_ptr<dist::ProcessGroup> world) {
  const int rank = world ? world->rank() : 0, ranks = world ? world->size() : 1;
  const bool lead = rank == 0;
  // --report: the page's metrics and trace, in a temporary directory when not asked for.
  const RunPage page(given, lead);
  const Config& c = page.config();
  if (c.threads > 0) set_num_threads(c.threads);
  manual_seed(c.seed);
  // --net-latency-us / --net-bandwidth-gbps: every group made from here on inherits it.
  if (world && (c.net_latency_us > 0 || c.net_bandwidth_gbps > 0)) {
    dist::NetworkEmulation net;
    net.latency_us = c.net_latency_us;
    if (c.net_bandwidth_gbps > 0) net.bandwidth_gbps = c.net_bandwidth_gbps;
    dist::set_network_emulation(net);
  }
  const auto wall_start = Clock::now();
  std::optional<Device> chosen;
  try {
    chosen = resolve_device(c, rank);
  } catch (const FlagError& e) {  // the same on every rank of one machine
    if (lead) std::fprintf(stderr, "train: %s\n(run with --help for the flags)\n", e.what());
    return 2;
  }
  const Device device = *chosen;

  // The data and the model; ranks started with different flags, models or data stop here.
  const Data d = load_data(c);
  auto model = make_model(c, d.channels, d.vocab_size);
  if (world) verify_configuration(c, *model, d, *world);
  const DType input_dtype = place_model(c, *model, device);
  const int64_t psi = model->num_parameters();

  // Every rank skips an overflowing fp16 step together: the data-parallel ranks, and for a
  // pipeline every stage (each sees only its own gradients), so the whole world.
  MixedPrecision precision(c, device, world);
  Parallelized parallel;
  try {
    build_strategy(c, model, world, precision, device, parallel);
  } catch (const FlagError& e) {
    if (lead) std::fprintf(stderr, "train: %s\n(run with --help for the flags)\n", e.what());
    return 2;  // on every rank: the library raised the same error everywhere
  }
  Strategy& strategy = *parallel.strategy;
  const RunContext run{c,         world.get(), ranks,         lead,
                       device,    input_dtype, *model,        strategy,
                       precision, psi,         parallel.head, parallel.topology ? &parallel.figures : nullptr};
  const auto schedule = make_schedule(c, strategy.optimizer());
  std::optional<Loaders> made;
  try {
    made.emplace(make_loaders(c, d, strategy, device));
  } catch (const FlagError& e) {  // the data's size against the batch: the same on every rank
    if (lead) std::fprintf(stderr, "train: %s\n(run with --help for the flags)\n", e.what());
    return 2;
  }
  const Loaders& loaders = *made;

  StartingPoint start;
  if (!c.resume.empty()) {
    std::optional<StartingPoint> resumed;
    try {
      resumed = resume(run, schedule.get());
    } catch (const FlagError& e) {  // another model or optimizer: read alike by every rank
      if (lead) std::fprintf(stderr, "train: %s\n", e.what());
      return 2;
    }
    if (!resumed) return 0;  // the checkpoint has done every epoch already
    start = *resumed;
  }
  make_checkpoint_dir(run);
  std::optional<MetricsFile> metrics(std::in_place, lead ? c.metrics : "");

  print_run_header(run, d);
  const RunTotals totals = train_epochs(run, loaders, schedule.get(), start, *metrics);
  metrics.reset();  // closed: the page reads it
  print_sample(run, d);
  save_trained_model(run);
  write_trace(run, page.trace_is_users());
  const std::string summary = final_json_line(run, totals, wall_start);
  page.write(summary);
  if (lead) {  // stdout's last line
    std::printf("%s\n", summary.c_str());
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace train
}  // namespace tessera

int main(int argc, char** argv) {
  const tessera::train::Config config = tessera::train::parse_flags(argc, argv);
  if (config.strategy == "single" && config.tensor_parallel == 1 && config.context_parallel == 1) {
    const std::string paths = tessera::train::output_paths_problem(config, true);
    if (!paths.empty()) {
      std::fprintf(stderr, "train: %s\n", paths.c_str());
      return 2;
    }
    try {
      return tessera::train::run(config, nullptr);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "\ntrain: %s\n", e.what());
      return 1;
    }
  }
  // Data, pipeline or tensor parallel: an error on any rank ends the whole job (no rank waits
  // forever).
  // (Read before MPI starts: Open MPI's singleton start-up sets OMPI_COMM_WORLD_RANK too.)
  const bool launched = tessera::train::launcher_rank().has_value();
  auto world = tessera::dist::init(&argc, &argv);
  tessera::dist::set_collective_timeout(config.collective_timeout);
  std::string wrong = tessera::train::check_against_world(config, world->size());
  {
    // The paths each rank uses (rank 0 writes the outputs), agreed on so that every rank ends
    // with exit code 2 when any finds a problem.
    const std::string paths = tessera::train::output_paths_problem(config, world->rank() == 0);
    // Said once: rank 0 says its own; another rank only a problem rank 0 does not share (a
    // path another node sees differently). Rank 0's shared part travels as a 32-bit hash.
    const std::string shared = tessera::train::output_paths_problem(config, false);
    tessera::Tensor zero_has = tessera::full(
        {1}, static_cast<double>(std::hash<std::string>()(shared) & 0xffffffffu), tessera::kF64);
    world->broadcast(zero_has, 0)->wait();
    const bool same_as_zero =
        static_cast<double>(std::hash<std::string>()(paths) & 0xffffffffu) == zero_has.item();
    if (!paths.empty() && (world->rank() == 0 || !same_as_zero)) {
      std::fprintf(stderr, "train (rank %d): %s\n", world->rank(), paths.c_str());
    }
    const double any = tessera::dist::all_reduce_scalar(paths.empty() ? 0.0 : 1.0, *world,
                                                        tessera::dist::ReduceOp::kMax);
    if (wrong.empty() && any > 0) wrong = "a path the flags name cannot be used (above)";
  }
  if (!wrong.empty()) {  // found by every rank alike: all end with code 2
    if (world->rank() == 0)
      std::fprintf(stderr, "train: %s\n(run with --help for the flags)\n", wrong.c_str());
    tessera::dist::finalize();
    return 2;
  }
  const std::string alone = tessera::train::one_rank_warning(config, world->size(), launched);
  if (!alone.empty()) std::fprintf(stderr, "train: %s\n", alone.c_str());
  const int code = tessera::dist::run_or_abort([&] { return tessera::train::run(config, world); });
  tessera::dist::finalize();
  return code;
}
