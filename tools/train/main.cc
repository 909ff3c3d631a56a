// train: trains a model on Fashion-MNIST (or synthetic images) with tessera and reports test
// accuracy, throughput and memory. See flags.cc for the flags and per-model defaults.
//
// Output: a progress bar (plain lines when stdout is not a terminal), one line per epoch, JSON
// lines per epoch to --metrics, and as the last line on stdout one JSON object with the run's
// figures. Exit codes: 0 done, 1 runtime error, 2 bad flags.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "data/data_loader.h"
#include "data/mnist.h"
#include "dist/checkpoint.h"
#include "models/resnet.h"
#include "nn/loss.h"
#include "models/simple.h"
#include "optim/adam.h"
#include "optim/lr_scheduler.h"
#include "optim/sgd.h"
#include "tensor/allocator.h"
#include "tensor/ops.h"
#include "tensor/parallel.h"
#include "tools/train/flags.h"
#include "tools/train/report.h"

namespace tessera {
namespace train {
namespace {

using Clock = std::chrono::steady_clock;

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

std::unique_ptr<optim::Optimizer> make_optimizer(const Config& c, std::vector<Variable> params) {
  if (c.optimizer == "sgd") {
    return std::make_unique<optim::SGD>(
        params, optim::SGDOptions(c.lr).momentum(c.momentum).weight_decay(c.weight_decay)
                    .nesterov(c.momentum > 0));
  }
  if (c.optimizer == "adam") {
    return std::make_unique<optim::Adam>(params,
                                         optim::AdamOptions(c.lr).weight_decay(c.weight_decay));
  }
  return std::make_unique<optim::AdamW>(
      params, optim::AdamWOptions(c.lr).weight_decay(c.weight_decay == 0 ? 1e-2 : c.weight_decay));
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

double evaluate(nn::Sequential& model, const data::DataLoader& loader) {
  NoGradGuard no_grad;
  model.eval();
  int64_t correct = 0, total = 0;
  for (data::Batch& b : loader.epoch(0)) {
    const Tensor logits = model.forward(Variable(b.inputs)).data();
    correct += static_cast<int64_t>(sum(eq(argmax(logits, 1), b.targets)).item());
    total += b.size();
  }
  model.train();
  return total > 0 ? static_cast<double>(correct) / total : 0.0;
}

void make_dirs(const std::string& path) {
  for (size_t at = 1; at <= path.size(); ++at) {
    if (at == path.size() || path[at] == '/') ::mkdir(path.substr(0, at).c_str(), 0755);
  }
  struct stat st;
  TS_CHECK(::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode),
           "train: cannot create the checkpoint directory '", path, "'");
}

int run(const Config& c) {
  if (c.threads > 0) set_num_threads(c.threads);
  manual_seed(c.seed);
  const auto wall_start = Clock::now();
  const Data d = load_data(c);
  auto model = make_model(c, d.channels);
  auto optimizer = make_optimizer(c, model->parameters());
  auto schedule = make_schedule(c, *optimizer);
  const nn::CrossEntropyLoss criterion(Reduction::kMean, c.label_smoothing);

  data::DataLoader train_loader(
      d.train, data::DataLoaderOptions(c.batch_size).shuffle(true).drop_last(true).seed(c.seed),
      make_transform(c, c.augment == 1));
  data::DataLoader test_loader(d.test, data::DataLoaderOptions(1000), make_transform(c, false));
  TS_CHECK(train_loader.num_batches() > 0, "train: ", d.train->size(),
           " training examples make no batch of ", c.batch_size);

  int64_t first_epoch = 1, step = 0;
  if (!c.resume.empty()) {
    const TrainingProgress p = load_checkpoint(c.resume, *model, optimizer.get());
    first_epoch = p.epoch + 1;
    step = p.step;
    default_generator().set_state(p.rng);
    if (schedule) schedule->set_epoch(p.epoch);
    std::printf("resumed from %s after epoch %lld\n", c.resume.c_str(),
                static_cast<long long>(p.epoch));
  }
  if (!c.checkpoint_dir.empty()) make_dirs(c.checkpoint_dir);
  std::ofstream metrics;
  if (!c.metrics.empty()) {
    metrics.open(c.metrics, std::ios::app);
    TS_CHECK(metrics.good(), "train: cannot open --metrics file '", c.metrics, "'");
  }

  std::printf("model %s (%lld parameters), %s: %lld train / %lld test, %s lr %g, batch %lld, "
              "%d threads\n",
              c.model.c_str(), static_cast<long long>(model->num_parameters()), c.data.c_str(),
              static_cast<long long>(d.train->size()), static_cast<long long>(d.test->size()),
              c.optimizer.c_str(), c.lr, static_cast<long long>(c.batch_size), num_threads());
  const bool tty = ::isatty(STDOUT_FILENO) != 0;
  reset_peak(Device::cpu());
  double train_loss = 0, accuracy = 0, images_per_second = 0, train_seconds = 0;
  int64_t train_images = 0;
  for (int64_t epoch = first_epoch; epoch <= c.epochs; ++epoch) {
    model->train();
    const double lr = optimizer->param_groups()[0].options->lr();
    Progress progress(epoch, c.epochs, train_loader.num_batches(), tty);
    const auto start = Clock::now();
    double loss_sum = 0;
    int64_t batches = 0, images = 0;
    for (data::Batch& batch : train_loader.epoch(epoch)) {
      Variable loss = criterion(model->forward(Variable(batch.inputs)), batch.targets);
      optimizer->zero_grad();
      loss.backward();
      optimizer->step();
      ++step;
      loss_sum += loss.item();
      ++batches;
      images += batch.size();
      progress.update(batches, loss_sum / batches, images / seconds_since(start));
    }
    progress.finish();
    const double seconds = seconds_since(start);
    if (schedule) schedule->step();
    train_loss = loss_sum / std::max<int64_t>(batches, 1);
    images_per_second = images / seconds;
    train_seconds += seconds;
    train_images += images;
    accuracy = evaluate(*model, test_loader);
    std::printf("epoch %lld/%lld  train_loss %.4f  test_accuracy %.4f  %.0f images/s  %.1f s  "
                "lr %.3g\n",
                static_cast<long long>(epoch), static_cast<long long>(c.epochs), train_loss,
                accuracy, images_per_second, seconds, lr);
    std::fflush(stdout);
    if (metrics.is_open()) {
      metrics << JsonObject().add("epoch", epoch).add("train_loss", train_loss)
                     .add("test_accuracy", accuracy).add("images_per_second", images_per_second)
                     .add("seconds", seconds).add("lr", lr).add("step", step).str()
              << std::endl;
    }
    if (!c.checkpoint_dir.empty()) {
      save_checkpoint(c.checkpoint_dir + "/last.safetensors", *model, optimizer.get(),
                      {epoch, step, default_generator().state()}, {{"model", c.model}});
    }
  }
  std::printf("%s\n",
              JsonObject()
                  .add("model", c.model)
                  .add("strategy", c.strategy)
                  .add("world_size", 1)
                  .add("epochs", c.epochs)
                  .add("train_loss", train_loss)
                  .add("test_accuracy", accuracy)
                  .add("images_per_second", train_seconds > 0 ? train_images / train_seconds : 0.0)
                  .add("wall_seconds", seconds_since(wall_start))
                  .add("peak_bytes", memory_stats(Device::cpu()).peak_bytes)
                  .add("parameters", model->num_parameters())
                  .add("threads", num_threads())
                  .str()
                  .c_str());
  return 0;
}

}  // namespace
}  // namespace train
}  // namespace tessera

int main(int argc, char** argv) {
  const tessera::train::Config config = tessera::train::parse_flags(argc, argv);
  try {
    return tessera::train::run(config);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "\ntrain: %s\n", e.what());
    return 1;
  }
}
