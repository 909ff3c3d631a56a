// train: trains a model on Fashion-MNIST (or synthetic images) with tessera and reports test
// accuracy, throughput and memory. See flags.cc for the flags and per-model defaults.
//
//   bazel-bin/tools/train --model=logistic                               one process
//   mpirun -np 2 bazel-bin/tools/train --model=logistic --strategy=zero1  data parallel
//   mpirun -np 2 bazel-bin/tools/train --model=mlp --strategy=pipeline    two pipeline stages
//   bazel-bin/tools/train --model=mlp --amp=bf16                         mixed precision
//
// Output (rank 0): a progress bar (plain lines when stdout is not a terminal), one line per
// epoch, JSON lines per epoch to --metrics, and as the last line on stdout one JSON object with
// the run's figures. Exit codes: 0 done, 1 runtime error (an error on any rank ends the whole
// job), 2 bad flags.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "data/data_loader.h"
#include "data/distributed_sampler.h"
#include "data/mnist.h"
#include "dist/checkpoint.h"
#include "dist/environment.h"
#include "dist/module_sync.h"
#include "dist/reduce_scalar.h"
#include "dist/settings_check.h"
#include "models/resnet.h"
#include "models/simple.h"
#include "nn/loss.h"
#include "optim/lr_scheduler.h"
#include "tensor/accelerator.h"
#include "tensor/allocator.h"
#include "tensor/ops.h"
#include "tensor/parallel.h"
#include "tools/train/flags.h"
#include "tools/train/precision.h"
#include "tools/train/report.h"
#include "tools/train/strategy.h"

namespace tessera {
namespace train {
namespace {

using Clock = std::chrono::steady_clock;
using tessera::Checkpoint;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::shared_ptr<nn::Sequential> make_model(const Config& c, int64_t channels) {
  if (c.model == "logistic") return models::LogisticRegression(channels * 28 * 28, 10);
  if (c.model == "mlp") return models::MLP(channels * 28 * 28, 256, 10);
  if (c.model == "resnet20") return models::ResNet20(channels, 10);
  if (c.model == "resnet32") return models::ResNet32(channels, 10);
  if (c.model == "resnet56") return models::ResNet56(channels, 10);
  if (c.model == "resnet18") return models::ResNet18(channels, 10);
  if (c.model == "resnet34") return models::ResNet34(channels, 10);
  return models::ResNet50(channels, 10);
}

std::shared_ptr<optim::LRScheduler> make_schedule(const Config& c, optim::Optimizer& opt) {
  const int64_t main_epochs = c.epochs - c.warmup_epochs;
  std::shared_ptr<optim::LRScheduler> s;
  if (c.schedule == "cosine") {
    s = std::make_shared<optim::CosineAnnealingLR>(opt, main_epochs);
  } else if (c.schedule == "step") {
    s = std::make_shared<optim::StepLR>(opt, std::max<int64_t>(1, main_epochs / 3), 0.1);
  }
  if (c.warmup_epochs > 0) s = std::make_shared<optim::LinearWarmupLR>(opt, c.warmup_epochs, 0.1, s);
  return s;
}

struct Data {
  std::shared_ptr<data::Dataset> train, test;
  int64_t channels = 1;
};

Data load_data(const Config& c) {
  Data d;
  if (c.data == "synthetic") {
    d.train = std::make_shared<data::SyntheticImages>(c.synthetic_size, 1, 28, 28, 10, c.seed);
    d.test = std::make_shared<data::SyntheticImages>(std::max<int64_t>(c.synthetic_size / 5, 1),
                                                     1, 28, 28, 10, c.seed + 1);
    return d;
  }
  data::ImageSet train = data::FashionMNIST(c.data_dir, true);
  data::ImageSet test = data::FashionMNIST(c.data_dir, false);
  if (c.train_limit > 0 && c.train_limit < train.size()) {
    train.images = train.images.narrow(0, 0, c.train_limit);
    train.labels = train.labels.narrow(0, 0, c.train_limit);
  }
  d.train = std::make_shared<data::TensorDataset>(train.images, train.labels);
  d.test = std::make_shared<data::TensorDataset>(test.images, test.labels);
  return d;
}

// u8 images -> normalized f32 (synthetic data is already f32), plus augmentation if asked.
data::Transform make_transform(const Config& c, bool augment) {
  const bool real = c.data == "fashion-mnist";
  return [real, augment](data::Batch batch, Generator& gen) {
    if (real) {
      batch.inputs = data::normalize(data::to_float(batch.inputs), data::kFashionMnistMean,
                                     data::kFashionMnistStd);
    }
    if (augment) {
      batch.inputs = data::random_crop(batch.inputs, 2, gen);
      batch.inputs = data::random_horizontal_flip(batch.inputs, 0.5, gen);
    }
    return batch;
  };
}

// Test accuracy; with data parallelism, each replica evaluates its shard and the counts are
// summed over one rank of each replica.
double evaluate(nn::Sequential& model, Strategy& strategy, const data::DataLoader& loader,
                Device device, DType input_dtype) {
  NoGradGuard no_grad;
  model.eval();
  int64_t correct = 0, total = 0;
  for (data::Batch& b : loader.epoch(0)) {
    const Tensor logits = strategy.predict(b.inputs.to(device).to(input_dtype));
    correct += static_cast<int64_t>(sum(eq(argmax(logits, 1), b.targets.to(device))).item());
    total += b.size();
  }
  model.train();
  dist::ProcessGroup* group = strategy.replica_group().get();
  if (group != nullptr) {
    Tensor counts = from_vector<int64_t>({correct, total}, {2});
    group->all_reduce(counts)->wait();
    correct = static_cast<int64_t>(counts.at({0}));
    total = static_cast<int64_t>(counts.at({1}));
  }
  return total > 0 ? static_cast<double>(correct) / total : 0.0;
}

double average_over_ranks(double value, dist::ProcessGroup* group) {
  return group == nullptr ? value : dist::all_reduce_scalar(value, *group, dist::ReduceOp::kAvg);
}

void make_dirs(const std::string& path) {
  for (size_t at = 1; at <= path.size(); ++at) {
    if (at == path.size() || path[at] == '/') ::mkdir(path.substr(0, at).c_str(), 0755);
  }
  struct stat st;
  TS_CHECK(::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode),
           "train: cannot create the checkpoint directory '", path, "'");
}

// The device this rank trains on: --device=cuda picks GPU (rank mod GPU count).
Device resolve_device(const Config& c, int rank) {
  if (c.device == "cpu") return Device::cpu();
  TS_CHECK(cuda_is_available(), "train: --device=", c.device, ": ", cuda_unavailable_reason());
  if (c.device == "cuda") return Device::cuda(rank % device_count(DeviceType::kCUDA));
  return Device::parse(c.device);
}

// Collective: DIR/last.safetensors with the whole model under its unpipelined names (so any
// strategy resumes from it), the optimizer's state unless split over pipeline stages, the
// progress and the loss scaler's state.
void save_epoch_checkpoint(const Config& c, const nn::Sequential& model, Strategy& strategy,
                           const MixedPrecision& precision, const TrainingProgress& progress,
                           bool lead) {
  const StateDict model_state = strategy.model_state(model);  // collective
  const bool with_optimizer = strategy.checkpoints_optimizer();
  StateDict optimizer_state;
  if (with_optimizer) optimizer_state = strategy.optimizer().state_dict();  // collective for ZeRO
  if (!lead) return;
  Metadata extra = precision.checkpoint_metadata();
  extra["model"] = c.model;
  extra["strategy"] = c.strategy;
  save_checkpoint(c.checkpoint_dir + "/last.safetensors", model_state,
                  with_optimizer ? &optimizer_state : nullptr, progress, extra);
}

// Collective: ranks started with different flags, models or data stop here, every one of them
// told which setting differs and its value on each rank (dist/settings_check.h).
void verify_configuration(const Config& c, const nn::Module& model, const Data& d,
                          dist::ProcessGroup& world) {
  dist::Settings settings = settings_that_must_agree(c);
  std::string parameters;
  for (const auto& [name, p] : model.named_parameters()) {
    parameters += name + shape_str(p.shape()) + " ";
  }
  settings.emplace_back("model parameters", parameters);
  settings.emplace_back("training examples", std::to_string(d.train->size()));
  settings.emplace_back("test examples", std::to_string(d.test->size()));
  dist::verify_same_settings(settings, world);
}

// The NaN guard: a loss that is inf or NaN stops the run at once, on every rank together (one
// flag all-reduced per step), before the epoch's checkpoint could overwrite the last good one.
// (An fp16 step whose gradients overflow is the loss scaler's business: it skips the step.)
void check_finite_loss(double loss, int64_t epoch, int64_t batch, int64_t batches, const Config& c,
                       dist::ProcessGroup* world) {
  double bad = std::isfinite(loss) ? 0 : 1;
  if (world != nullptr) bad = dist::all_reduce_scalar(bad, *world, dist::ReduceOp::kMax);
  if (bad == 0) return;
  TS_FAIL("the training loss is not finite (", std::isfinite(loss) ? "on another rank" :
          std::to_string(loss) + " on this rank", ") at epoch ", epoch, ", batch ", batch, " of ",
          batches, "; stopping", c.checkpoint_dir.empty() ? "" : " (the last checkpoint in " +
          c.checkpoint_dir + " is left as it was)", ". Lower --lr (", c.lr, ") or check the data");
}

int run(const Config& c, std::shared_ptr<dist::ProcessGroup> world) {
  if (c.threads > 0) set_num_threads(c.threads);
  manual_seed(c.seed);
  const int rank = world ? world->rank() : 0, ranks = world ? world->size() : 1;
  const bool lead = rank == 0;
  const auto wall_start = Clock::now();
  const Device device = resolve_device(c, rank);
  const Data d = load_data(c);
  auto model = make_model(c, d.channels);
  if (world) verify_configuration(c, *model, d, *world);
  model->to(device);  // before the strategy: DDP broadcasts and ZeRO shards the device's tensors
  // Half-precision parameters take inputs of their dtype (BatchNorm stays f32 and takes them).
  const DType input_dtype = c.param_dtype == "f16" ? kF16 : c.param_dtype == "bf16" ? kBF16 : kF32;
  model->to(input_dtype);
  // Every rank skips an overflowing fp16 step together: the data-parallel ranks, and for a
  // pipeline every stage (each sees only its own gradients), so the whole world.
  MixedPrecision precision(c, device, world);
  const nn::CrossEntropyLoss cross_entropy(Reduction::kMean, c.label_smoothing);
  const Criterion criterion = [cross_entropy](const Variable& out, const Tensor& y) {
    return cross_entropy(out, y);
  };
  std::unique_ptr<Strategy> strategy;
  try {
    strategy = make_strategy(c, model, world, criterion, precision, device);
  } catch (const FlagError& e) {
    if (lead) std::fprintf(stderr, "train: %s\n(run with --help for the flags)\n", e.what());
    return 2;  // on every rank: the library raised the same error everywhere
  }
  auto schedule = make_schedule(c, strategy->optimizer());

  // Each data-parallel replica trains on its own shard (--batch-size per replica: every stage
  // of a pipeline reads the same batches) and evaluates its own part.
  const int replicas = strategy->replicas();
  std::shared_ptr<data::Sampler> train_sampler, test_sampler;
  if (replicas > 1) {
    const int replica = strategy->replica();
    train_sampler = std::make_shared<data::DistributedSampler>(
        d.train->size(), data::DistributedSamplerOptions(replicas, replica).seed(c.seed));
    test_sampler = std::make_shared<data::DistributedSampler>(
        d.test->size(),
        data::DistributedSamplerOptions(replicas, replica).shuffle(false).pad(false));
  }
  data::DataLoader train_loader(
      d.train,
      data::DataLoaderOptions(c.batch_size).shuffle(true).drop_last(true).seed(c.seed).pin_memory(
          device.is_cuda()),
      make_transform(c, c.augment == 1), train_sampler);
  data::DataLoader test_loader(d.test, data::DataLoaderOptions(1000), make_transform(c, false),
                               test_sampler);
  TS_CHECK(train_loader.num_batches() > 0, "train: ", d.train->size(),
           " training examples make no batch of ", c.batch_size, " on each of ", replicas,
           " data-parallel replicas");

  int64_t first_epoch = 1, step = 0;
  if (!c.resume.empty()) {
    const std::string resume = resume_file(c.resume);
    const Checkpoint ckpt = read_checkpoint(resume);
    if (ckpt.progress.epoch >= c.epochs) {
      // Nothing to train: say so rather than report a run of zero epochs as a result.
      if (lead) {
        std::printf("train: %s already completed %lld epoch%s, and --epochs is %lld: nothing to "
                    "train (raise --epochs to continue)\n",
                    resume.c_str(), static_cast<long long>(ckpt.progress.epoch),
                    ckpt.progress.epoch == 1 ? "" : "s", static_cast<long long>(c.epochs));
      }
      return 0;
    }
    strategy->load_model_state(*model, ckpt);
    // A pipeline's optimizer state is split over its stages; its checkpoints hold none.
    const bool load_optimizer = !ckpt.optimizer.empty() && strategy->checkpoints_optimizer();
    if (load_optimizer) load_optimizer_state(ckpt, strategy->optimizer());
    if (lead && !load_optimizer) {
      std::printf("%s: the optimizer starts fresh (%s)\n", resume.c_str(),
                  ckpt.optimizer.empty() ? "the checkpoint holds no optimizer state"
                                         : "its state is per pipeline stage or ZeRO-3 shard");
    }
    precision.load_checkpoint_metadata(ckpt.metadata);
    first_epoch = ckpt.progress.epoch + 1;
    step = ckpt.progress.step;
    default_generator().set_state(ckpt.progress.rng);
    if (schedule) schedule->set_epoch(ckpt.progress.epoch);
    if (lead) {
      std::printf("resumed from %s after epoch %lld\n", resume.c_str(),
                  static_cast<long long>(ckpt.progress.epoch));
    }
  }
  if (!c.checkpoint_dir.empty() && lead) make_dirs(c.checkpoint_dir);
  std::ofstream metrics;
  if (!c.metrics.empty() && lead) {
    metrics.open(c.metrics, std::ios::app);
    TS_CHECK(metrics.good(), "train: cannot open --metrics file '", c.metrics, "'");
  }

  if (lead) {
    std::printf("model %s (%lld parameters), %s: %lld train / %lld test, %s lr %g weight decay "
                "%g, batch %lld, %s on %d rank%s, %s, %d threads\n",
                c.model.c_str(), static_cast<long long>(model->num_parameters()), c.data.c_str(),
                static_cast<long long>(d.train->size()), static_cast<long long>(d.test->size()),
                c.optimizer.c_str(), c.lr, c.weight_decay, static_cast<long long>(c.batch_size),
                c.strategy.c_str(),
                ranks, ranks == 1 ? "" : "s", device.str().c_str(), num_threads());
    std::printf("precision: %s\n", precision.describe().c_str());
  }
  // mpirun gives rank 0 a pseudo-terminal even when its own output is a file: plain lines then.
  const bool tty = lead && !world && ::isatty(STDOUT_FILENO) != 0;
  reset_peak(Device::cpu());
  if (device.is_cuda()) reset_peak(device);
  // Bytes sent over every group of the strategy (the ledgers are per group).
  const std::vector<dist::ProcessGroup*> groups = strategy->groups();
  auto bytes_sent = [&groups] {
    int64_t total = 0;
    for (dist::ProcessGroup* g : groups) total += g->ledger().total_bytes();
    return total;
  };
  for (dist::ProcessGroup* g : groups) g->ledger().reset();
  double train_loss = 0, accuracy = 0, train_seconds = 0;
  int64_t train_images = 0, train_steps = 0, train_comm_bytes = 0, skipped_steps = 0;
  for (int64_t epoch = first_epoch; epoch <= c.epochs; ++epoch) {
    model->train();
    const double lr = strategy->optimizer().param_groups()[0].options->lr();
    Progress progress(epoch, c.epochs, train_loader.num_batches(), tty);
    const auto start = Clock::now();
    double loss_sum = 0;
    int64_t batches = 0, images = 0;
    const int64_t comm_before = bytes_sent();
    for (data::Batch& batch : train_loader.epoch(epoch)) {
      const double loss = strategy->train_step(batch.inputs.to(device).to(input_dtype),
                                               batch.targets.to(device));
      check_finite_loss(loss, epoch, batches + 1, train_loader.num_batches(), c, world.get());
      if (!precision.step(strategy->optimizer())) ++skipped_steps;  // the same on every rank
      strategy->after_step();
      ++step;
      loss_sum += loss;
      ++batches;
      images += batch.size() * replicas;
      if (lead) progress.update(batches, loss_sum / batches, images / seconds_since(start));
    }
    if (lead) progress.finish();
    const double seconds = seconds_since(start);
    // Only the training steps' traffic counts toward bytes per step (not evaluation's).
    train_comm_bytes += bytes_sent() - comm_before;
    if (schedule) schedule->step();
    train_loss = average_over_ranks(loss_sum / std::max<int64_t>(batches, 1), world.get());
    const double images_per_second = images / seconds;
    train_seconds += seconds;
    train_images += images;
    train_steps += batches;
    // The ranks holding the same parameters evaluate (and rank 0 saves) replica 0's BatchNorm
    // statistics (dist::sync_buffers over the world, or a pipeline stage's replicas).
    strategy->sync_buffers();
    accuracy = evaluate(*model, *strategy, test_loader, device, input_dtype);
    if (lead) {
      std::printf("epoch %lld/%lld  train_loss %.4f  test_accuracy %.4f  %.0f images/s  %.1f s  "
                  "lr %.3g\n",
                  static_cast<long long>(epoch), static_cast<long long>(c.epochs), train_loss,
                  accuracy, images_per_second, seconds, lr);
      std::fflush(stdout);
    }
    if (metrics.is_open()) {
      metrics << JsonObject()
                     .add("epoch", epoch)
                     .add("train_loss", train_loss)
                     .add("test_accuracy", accuracy)
                     .add("images_per_second", images_per_second)
                     .add("seconds", seconds)
                     .add("lr", lr)
                     .add("step", step)
                     .add("loss_scale", precision.scaler().get_scale())
                     .str()
              << std::endl;
      // A full disk must not lose the metrics silently.
      TS_CHECK(metrics.good(), "train: writing the --metrics file '", c.metrics, "' failed after "
               "epoch ", epoch, " (disk full?)");
    }
    if (!c.checkpoint_dir.empty()) {
      save_epoch_checkpoint(c, *model, *strategy, precision,
                            {epoch, step, default_generator().state()}, lead);
    }
  }

  // Per-rank figures, gathered to everyone: peak memory and optimizer state.
  // Peak memory of the device trained on (the CPU's, or the GPU's).
  std::vector<int64_t> peaks{memory_stats(device).peak_bytes};
  std::vector<int64_t> states{strategy->optimizer().state_bytes()};
  int64_t comm_bytes_per_step = 0;
  if (world) {
    Tensor gathered = empty({2 * ranks}, kI64);
    world->all_gather(from_vector<int64_t>({peaks[0], states[0]}, {2}), gathered)->wait();
    const std::vector<int64_t> all = gathered.to_vector<int64_t>();
    peaks.clear();
    states.clear();
    for (int k = 0; k < ranks; ++k) {
      peaks.push_back(all[2 * k]);
      states.push_back(all[2 * k + 1]);
    }
    comm_bytes_per_step = train_comm_bytes / std::max<int64_t>(train_steps, 1);
  }
  JsonObject summary;
  summary.add("model", c.model)
      .add("strategy", c.strategy)
      .add("world_size", ranks)
      .add("device", device.str())
      .add("epochs", c.epochs)
      .add("train_loss", train_loss)
      .add("test_accuracy", accuracy)
      .add("images_per_second", train_seconds > 0 ? train_images / train_seconds : 0.0)
      .add("wall_seconds", seconds_since(wall_start));
  if (lead) {
    auto list = [](const std::vector<int64_t>& v) {
      std::string s = "[";
      for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
      return s + "]";
    };
    const char* names[] = {"", ", world group", ", pipeline group", ", data-parallel group"};
    for (size_t i = 0; i < groups.size(); ++i) {
      std::printf("communication, whole run (rank 0%s): %s\n", names[groups.size() > 1 ? i + 1 : 0],
                  groups[i]->ledger().str().c_str());
    }
    summary.add("peak_bytes", *std::max_element(peaks.begin(), peaks.end()))
        .add_raw("peak_bytes_per_rank", list(peaks))
        .add_raw("optimizer_state_bytes_per_rank", list(states))
        .add("comm_bytes_per_step", comm_bytes_per_step)
        .add("parameters", model->num_parameters())
        .add("threads", num_threads())
        .add("amp", c.amp)
        .add("loss_scale", precision.scaler().get_scale())
        .add("skipped_steps", skipped_steps);
  }
  strategy->report(summary, lead);  // collective
  if (lead) {
    std::printf("%s\n", summary.str().c_str());
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace train
}  // namespace tessera

int main(int argc, char** argv) {
  const tessera::train::Config config = tessera::train::parse_flags(argc, argv);
  if (config.strategy == "single") {
    try {
      return tessera::train::run(config, nullptr);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "\ntrain: %s\n", e.what());
      return 1;
    }
  }
  // Data parallel or a pipeline: an error on any rank ends the whole job (no rank waits forever).
  auto world = tessera::dist::init(&argc, &argv);
  const std::string wrong = tessera::train::check_against_world(config, world->size());
  if (!wrong.empty()) {  // found by every rank alike: all end with code 2
    if (world->rank() == 0)
      std::fprintf(stderr, "train: %s\n(run with --help for the flags)\n", wrong.c_str());
    tessera::dist::finalize();
    return 2;
  }
  const int code = tessera::dist::run_or_abort([&] { return tessera::train::run(config, world); });
  tessera::dist::finalize();
  return code;
}
