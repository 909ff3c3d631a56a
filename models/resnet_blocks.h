// Residual blocks (He et al., "Deep Residual Learning for Image Recognition", 2016).
//
//   BasicBlock:  x -> conv3x3 -> BN -> ReLU -> conv3x3 -> BN -> (+ shortcut(x)) -> ReLU
//   Bottleneck:  x -> conv1x1 -> BN -> ReLU -> conv3x3 (stride) -> BN -> ReLU
//                  -> conv1x1 (x4 channels) -> BN -> (+ shortcut(x)) -> ReLU
//
// When the block changes resolution or width, the shortcut must too:
//   option A (the paper's CIFAR networks): take every stride-th pixel and pad the new channels
//            with zeros: no parameters;
//   option B (ImageNet networks): a 1x1 convolution with stride, then BN.
//
// Every BN -> ReLU and BN -> (+ shortcut) -> ReLU runs as one fused op
// (nn::BatchNorm2d::forward_relu): one pass over the activation forward, the ReLU's mask
// inside batch norm's backward passes.
#pragma once

#include <memory>

#include "nn/nn.h"

namespace tessera {
namespace models {

enum class Shortcut { kA, kB };

class BasicBlock : public nn::Module {
 public:
  static constexpr int64_t kExpansion = 1;
  BasicBlock(int64_t in_channels, int64_t channels, int64_t stride, Shortcut shortcut);
  std::string type_name() const override { return "BasicBlock"; }
  Variable forward(const Variable& x) override;

 private:
  int64_t in_channels_, channels_, stride_;
  Shortcut shortcut_;
  std::shared_ptr<nn::Conv2d> conv1_, conv2_;
  std::shared_ptr<nn::BatchNorm2d> bn1_, bn2_;
  std::shared_ptr<nn::Sequential> projection_;  // option B only
};

class Bottleneck : public nn::Module {
 public:
  static constexpr int64_t kExpansion = 4;
  Bottleneck(int64_t in_channels, int64_t channels, int64_t stride);
  std::string type_name() const override { return "Bottleneck"; }
  Variable forward(const Variable& x) override;

 private:
  std::shared_ptr<nn::Conv2d> conv1_, conv2_, conv3_;
  std::shared_ptr<nn::BatchNorm2d> bn1_, bn2_, bn3_;
  std::shared_ptr<nn::Sequential> projection_;
};

// Option A: x[:, :, ::stride, ::stride] with zero channels added evenly on both sides.
Variable shortcut_a(const Variable& x, int64_t out_channels, int64_t stride);

}  // namespace models
}  // namespace tessera
