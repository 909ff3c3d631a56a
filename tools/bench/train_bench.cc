// Training-step benchmark: forward + loss + backward + optimizer step on a fixed synthetic
// batch, median (and min) milliseconds per step after warm-up, at 1 and 2 threads, in f32 or
// under autocast, with the bytes the forward leaves for backward.
//
//   bazel run -c opt --config=native //tools/bench:train_bench [-- --models=resnet20 --steps=N
//       --threads=N (1 and 2 by default) --amp=off,bf16,fp16 (off by default) --clock=cpu
//       --param-dtype=f32|bf16|f16 --channels-last|--channels-blocked]
//
// Shapes as the LibTorch reference figures in issue 3: logistic b=64, MLP b=64, ResNet-20
// b=128 (CIFAR-style, option-A shortcuts, 1 input channel, 28x28), SGD with momentum; and as
// issue 15's PyTorch figures: ImageNet-style ResNet-18 and ResNet-50 at batch 8, 3x224x224,
// 1000 classes (tools/bench/pytorch_cpu_reference.py times the same steps, --amp too;
// side_by_side.sh runs both alternately). --models=resnet18,resnet50 picks them; the default
// runs the first three only, as before.
//
// The GPTs (models/gpt.h, issue 50): GPT-2 124M ("gpt2", vocabulary 50304) at batch 4 of 64
// tokens and gpt-nano at batch 8 of 64, random token ids, lm_loss, AdamW (betas 0.9, 0.95;
// weight decay 0.1 on the Linear weights); --batch and --seq-len change their shapes, and
// "tokens/s" is batch x seq-len over the median step (tools/bench/pytorch_gpt_reference.py
// times the same step in PyTorch eager).
//
// "activation MiB" is what the forward (and loss) leaves allocated for backward, from the
// counting allocator: bytes in use after the loss minus before the forward, i.e. the saved
// activations (and, under autocast, the parameters' low-precision casts, cached per forward).
// "amp" is the autocast dtype (off: f32 throughout). --channels-last runs the model with
// channels-last activations (Module::to(MemoryFormat)), --channels-blocked with nChw16c ones,
// the input staying NCHW.
#include <algorithm>
#include <memory>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "models/gpt.h"
#include "models/resnet.h"
#include "models/simple.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "tensor/allocator.h"
#include "tensor/ops.h"
#include "tensor/parallel.h"
#include "tools/bench/bench_clock.h"
#include "tools/bench/bench_flags.h"
#include "tools/bench/median.h"
#include "tools/bench/train_bench_flags.h"

using namespace tessera;
using bench::now_ms;

namespace {

struct Case {
  std::string model;
  int64_t batch;
  int warmup, steps;
  int64_t channels = 1, size = 28;  // input image: channels x size x size
  bool by_default = true;           // run without --models
  int64_t seq_len = 0;              // a GPT's tokens per sequence (0: an image model)
};

// The models' shapes, as the reference figures (above) were taken.
std::vector<Case> cases(int resnet_steps) {
  return {{"logistic", 64, 50, 2000},
          {"mlp", 64, 20, 500},
          {"resnet20", 128, 3, resnet_steps},
          {"resnet18", 8, 2, resnet_steps, 3, 224, false},
          {"resnet50", 8, 2, resnet_steps, 3, 224, false},
          {"gpt-nano", 8, 2, resnet_steps, 0, 0, false, 64},
          {"gpt2", 4, 2, resnet_steps, 0, 0, false, 64}};
}

// Without --models the default cases; with it, those it names.
bool selected(const Case& c, const std::string& models) {
  if (models.empty()) return c.by_default;
  const std::vector<std::string> names = bench::split_commas(models);
  return std::find(names.begin(), names.end(), c.model) != names.end();
}

std::shared_ptr<nn::Sequential> build(const std::string& name) {
  if (name == "logistic") return models::LogisticRegression();
  if (name == "mlp") return models::MLP();
  if (name == "resnet18") return models::ResNet18(3, 1000);
  if (name == "resnet50") return models::ResNet50(3, 1000);
  if (name.rfind("gpt", 0) == 0) return models::GPT(models::GPTConfig::named(name, 50257));
  return models::ResNet20(1, 10);
}

struct Timing {
  std::vector<double> ms;       // per step after warm-up
  int64_t activation_bytes = 0;  // left by the last step's forward for its backward
};

// amp: "off", "bf16" or "fp16". param_dtype: see TrainBenchFlags.
Timing time_steps(const Case& c, int threads, const std::string& amp, DType param_dtype,
                  MemoryFormat memory_format) {
  set_num_threads(threads);
  manual_seed(0);
  auto model = build(c.model);
  if (param_dtype != kF32) model->to(param_dtype);
  if (memory_format != MemoryFormat::kContiguous) model->to(memory_format);
  const bool gpt = c.seq_len > 0;
  std::unique_ptr<optim::Optimizer> opt;
  if (gpt) {
    auto [decay, no_decay] = models::weight_decay_groups(*model);
    const auto adamw = optim::AdamOptions(6e-4).betas({0.9, 0.95}).eps(1e-8);
    std::vector<optim::ParamGroup> groups;
    groups.emplace_back(decay, std::make_unique<optim::AdamOptions>(optim::AdamOptions(adamw).weight_decay(0.1)));
    groups.emplace_back(no_decay, std::make_unique<optim::AdamOptions>(optim::AdamOptions(adamw).weight_decay(0)));
    opt = std::make_unique<optim::AdamW>(std::move(groups), adamw);
  } else {
    opt = std::make_unique<optim::SGD>(model->parameters(), optim::SGDOptions(0.01).momentum(0.9));
  }
  // Half-precision parameters take inputs of their dtype (as the train tool's place_model);
  // under autocast the first layer casts them anyway. A GPT takes token ids.
  const int64_t vocab = 50257;  // GPT-2's tokens (the padded rows are never drawn)
  auto tokens = [&] { return uniform({c.batch, c.seq_len}, 0, vocab - 1).to(kI64); };
  const Tensor x = gpt ? tokens()
                       : randn({c.batch, c.channels, c.size, c.size}).to(param_dtype);
  const Tensor y = arange(c.batch, kI64);
  const Tensor labels = gpt ? tokens()
                            : sub(y, mul(div(y, 10.0).to(kI64), 10.0)).to(kI64);  // y mod 10
  Timing t;
  const Device cpu = Device::cpu();
  for (int i = 0; i < c.warmup + c.steps; ++i) {
    const double start = now_ms();
    opt->zero_grad();
    const int64_t before = memory_stats(cpu).current_bytes;
    Variable loss;
    {
      std::optional<AutocastGuard> autocast;
      if (amp != "off") autocast.emplace(amp == "fp16" ? kF16 : kBF16);
      const Variable out = model->forward(Variable(x));
      loss = gpt ? models::lm_loss(out, labels) : cross_entropy(out, labels);
    }
    t.activation_bytes = memory_stats(cpu).current_bytes - before;
    loss.backward();
    opt->step();
    const double elapsed = now_ms() - start;
    if (i >= c.warmup) t.ms.push_back(elapsed);
  }
  return t;
}

// The table. side_by_side.sh reads a row's median and min as its 4th and 5th fields.
void print_header() {
  std::printf("%-10s %6s %8s %14s %12s %5s %15s %10s\n", "model", "batch", "threads",
              "median ms/step", "min ms/step", "amp", "activation MiB", "tokens/s");
}

void print_row(const Case& c, int threads, const std::string& amp, const Timing& t) {
  const double median = bench::median(t.ms);
  std::printf("%-10s %6lld %8d %14.3f %12.3f %5s %15.2f %10.0f\n", c.model.c_str(),
              static_cast<long long>(c.batch), threads, median,
              *std::min_element(t.ms.begin(), t.ms.end()), amp.c_str(),
              t.activation_bytes / 1048576.0, c.seq_len > 0 ? c.batch * c.seq_len * 1e3 / median : 0.0);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  bench::TrainBenchFlags flags;
  if (!bench::parse_train_bench_flags(argc, argv, &flags)) return 2;
  print_header();
  for (Case c : cases(flags.resnet_steps)) {
    if (!selected(c, flags.models)) continue;
    if (c.seq_len > 0 && flags.batch > 0) c.batch = flags.batch;
    if (c.seq_len > 0 && flags.seq_len > 0) c.seq_len = flags.seq_len;
    for (int threads : flags.thread_counts) {
      for (const std::string& amp : flags.amps) {
        print_row(c, threads, amp, time_steps(c, threads, amp, flags.param_dtype,
                                                       flags.memory_format));
      }
    }
  }
  return 0;
}
