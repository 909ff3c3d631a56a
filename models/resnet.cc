#include "models/resnet.h"

#include "models/resnet_blocks.h"
#include "nn/nn.h"

namespace tessera {
namespace models {

namespace {

void init_weights(nn::Module& model) {
  for (auto& [name, module] : model.named_modules()) {
    if (auto* conv = dynamic_cast<nn::Conv2d*>(module)) {
      nn::init::kaiming_normal_(conv->weight().data(), 0, nn::init::FanMode::kFanOut,
                                nn::init::Nonlinearity::kReLU);
    }
  }
}

std::shared_ptr<nn::Sequential> head(int64_t features, int64_t classes) {
  auto h = std::make_shared<nn::Sequential>();
  h->push_back("pool", std::make_shared<nn::AdaptiveAvgPool2d>(1));
  h->push_back("flatten", std::make_shared<nn::Flatten>());
  h->push_back("fc", std::make_shared<nn::Linear>(features, classes));
  return h;
}

std::string block_name(int stage, int index) {
  return "layer" + std::to_string(stage) + "_" + std::to_string(index);
}

}  // namespace

std::shared_ptr<nn::Sequential> ResNetCifar(int64_t depth, int64_t in_channels, int64_t classes) {
  TS_CHECK(depth >= 8 && (depth - 2) % 6 == 0, "ResNetCifar: depth must be 6n + 2 (20, 32, 44, "
           "56, 110), got ", depth);
  const int64_t n = (depth - 2) / 6;
  auto model = std::make_shared<nn::Sequential>();
  auto stem = std::make_shared<nn::Sequential>();
  stem->push_back("conv", std::make_shared<nn::Conv2d>(
                              nn::Conv2dOptions(in_channels, 16, 3).padding(1).bias(false)));
  stem->push_back("bn", std::make_shared<nn::BNReLU2d>(16));  // BN and ReLU, fused
  model->push_back("stem", stem);
  int64_t channels = 16;
  for (int stage = 1; stage <= 3; ++stage) {
    const int64_t width = 16 << (stage - 1);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t stride = (stage > 1 && i == 0) ? 2 : 1;
      model->push_back(block_name(stage, static_cast<int>(i)),
                       std::make_shared<BasicBlock>(channels, width, stride, Shortcut::kA));
      channels = width;
    }
  }
  model->push_back("head", head(channels, classes));
  init_weights(*model);
  return model;
}

std::shared_ptr<nn::Sequential> ResNetImageNet(int64_t depth, int64_t in_channels,
                                               int64_t classes) {
  std::vector<int64_t> blocks;
  const bool bottleneck = depth == 50;
  if (depth == 18) blocks = {2, 2, 2, 2};
  else if (depth == 34 || depth == 50) blocks = {3, 4, 6, 3};
  else TS_FAIL("ResNetImageNet: depth must be 18, 34 or 50, got ", depth);
  auto model = std::make_shared<nn::Sequential>();
  auto stem = std::make_shared<nn::Sequential>();
  stem->push_back("conv", std::make_shared<nn::Conv2d>(
                              nn::Conv2dOptions(in_channels, 64, 7).stride(2).padding(3).bias(false)));
  stem->push_back("bn", std::make_shared<nn::BNReLU2d>(64));  // BN and ReLU, fused
  stem->push_back("pool", std::make_shared<nn::MaxPool2d>(nn::Pool2dOptions(3).stride(2).padding(1)));
  model->push_back("stem", stem);
  int64_t channels = 64;
  for (int stage = 1; stage <= 4; ++stage) {
    const int64_t width = 64 << (stage - 1);
    for (int64_t i = 0; i < blocks[stage - 1]; ++i) {
      const int64_t stride = (stage > 1 && i == 0) ? 2 : 1;
      std::shared_ptr<nn::Module> block;
      if (bottleneck) {
        block = std::make_shared<Bottleneck>(channels, width, stride);
        channels = width * Bottleneck::kExpansion;
      } else {
        block = std::make_shared<BasicBlock>(channels, width, stride, Shortcut::kB);
        channels = width;
      }
      model->push_back(block_name(stage, static_cast<int>(i)), block);
    }
  }
  model->push_back("head", head(channels, classes));
  init_weights(*model);
  return model;
}

}  // namespace models
}  // namespace tessera
