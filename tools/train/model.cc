#include "tools/train/model.h"

#include <algorithm>
#include <optional>

#include "data/mnist.h"
#include "models/gpt.h"
#include "models/resnet.h"
#include "models/simple.h"
#include "tensor/deferred_init.h"

namespace tessera {
namespace train {

std::shared_ptr<nn::Sequential> make_model(const Config& c, int64_t channels,
                                           int64_t vocab_size) {
  // --offload=all: the model's shapes only (tensor/deferred_init.h); ZeRO-3 materializes each
  // unit as it shards and offloads it, so the whole model is never in memory (DeepSpeed's
  // zero.Init). The values are the eagerly built model's, bit for bit.
  std::optional<DeferredInit> deferred;
  if (c.offload == "all") deferred.emplace();
  if (language_model(c)) {
    models::GPTConfig config = gpt_config(c, vocab_size);
    config.recompute = models::Recompute::parse(c.recompute, c.recompute_modules);
    return models::GPT(config);
  }
  const int64_t k = c.num_classes;  // 10 for Fashion-MNIST
  const int64_t pixels = data::kMnistImage.height * data::kMnistImage.width;
  if (c.model == "logistic") return models::LogisticRegression(channels * pixels, k);
  if (c.model == "mlp") return models::MLP(channels * pixels, 256, k);
  if (c.model == "resnet20") return models::ResNet20(channels, k);
  if (c.model == "resnet32") return models::ResNet32(channels, k);
  if (c.model == "resnet56") return models::ResNet56(channels, k);
  if (c.model == "resnet18") return models::ResNet18(channels, k);
  if (c.model == "resnet34") return models::ResNet34(channels, k);
  return models::ResNet50(channels, k);
}

DType place_model(const Config& c, nn::Module& model, Device device) {
  model.to(device);
  // Half-precision parameters take inputs of their dtype (BatchNorm stays f32 and takes them).
  const DType input_dtype = c.param_dtype == "f16" ? kF16 : c.param_dtype == "bf16" ? kBF16 : kF32;
  model.to(input_dtype);
  if (c.memory_format == "channels-last") model.to(MemoryFormat::kChannelsLast);
  if (c.memory_format == "channels-blocked") model.to(MemoryFormat::kChannelsBlocked);
  return input_dtype;
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

}  // namespace train
}  // namespace tessera
