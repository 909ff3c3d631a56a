#include "models/resnet_blocks.h"

#include "autograd/functions.h"
#include "tensor/ops.h"

namespace tessera {
namespace models {

namespace {

std::shared_ptr<nn::Conv2d> conv(int64_t in, int64_t out, int64_t kernel, int64_t stride) {
  return std::make_shared<nn::Conv2d>(
      nn::Conv2dOptions(in, out, kernel).stride(stride).padding(kernel / 2).bias(false));
}

std::shared_ptr<nn::Sequential> projection(int64_t in, int64_t out, int64_t stride) {
  auto p = std::make_shared<nn::Sequential>();
  p->push_back(conv(in, out, 1, stride));
  p->push_back(std::make_shared<nn::BatchNorm2d>(out));
  return p;
}

}  // namespace

Variable shortcut_a(const Variable& x, int64_t out_channels, int64_t stride) {
  const int64_t in_channels = x.size(1);
  TS_CHECK(out_channels >= in_channels, "shortcut_a: cannot shrink ", in_channels, " channels to ",
           out_channels);
  Variable h = stride == 1 ? x : slice(slice(x, 2, 0, x.size(2), stride), 3, 0, x.size(3), stride);
  const int64_t extra = out_channels - in_channels;
  if (extra == 0) return h;
  const int64_t before = extra / 2, after = extra - before;
  const TensorOptions o = h.data().options();
  std::vector<Variable> parts;
  if (before > 0) parts.emplace_back(zeros({h.size(0), before, h.size(2), h.size(3)}, o));
  parts.push_back(h);
  if (after > 0) parts.emplace_back(zeros({h.size(0), after, h.size(2), h.size(3)}, o));
  return cat(parts, 1);
}

BasicBlock::BasicBlock(int64_t in_channels, int64_t channels, int64_t stride, Shortcut shortcut)
    : in_channels_(in_channels), channels_(channels), stride_(stride), shortcut_(shortcut) {
  conv1_ = register_module("conv1", conv(in_channels, channels, 3, stride));
  bn1_ = register_module("bn1", std::make_shared<nn::BatchNorm2d>(channels));
  conv2_ = register_module("conv2", conv(channels, channels, 3, 1));
  bn2_ = register_module("bn2", std::make_shared<nn::BatchNorm2d>(channels));
  if ((stride != 1 || in_channels != channels) && shortcut == Shortcut::kB) {
    projection_ = register_module("shortcut", projection(in_channels, channels, stride));
  }
}

// Each BN -> ReLU, and the last BN -> + shortcut -> ReLU, is one fused op (forward_relu): one
// pass over the activation instead of three.
Variable BasicBlock::forward(const Variable& x) {
  Variable out = bn1_->forward_relu((*conv1_)(x));
  out = (*conv2_)(out);
  Variable identity = x;
  if (projection_) {
    identity = (*projection_)(x);
  } else if (stride_ != 1 || in_channels_ != channels_) {
    identity = shortcut_a(x, channels_, stride_);
  }
  return bn2_->forward_relu(out, identity);
}

Bottleneck::Bottleneck(int64_t in_channels, int64_t channels, int64_t stride) {
  const int64_t out = channels * kExpansion;
  conv1_ = register_module("conv1", conv(in_channels, channels, 1, 1));
  bn1_ = register_module("bn1", std::make_shared<nn::BatchNorm2d>(channels));
  conv2_ = register_module("conv2", conv(channels, channels, 3, stride));
  bn2_ = register_module("bn2", std::make_shared<nn::BatchNorm2d>(channels));
  conv3_ = register_module("conv3", conv(channels, out, 1, 1));
  bn3_ = register_module("bn3", std::make_shared<nn::BatchNorm2d>(out));
  if (stride != 1 || in_channels != out) {
    projection_ = register_module("shortcut", projection(in_channels, out, stride));
  }
}

Variable Bottleneck::forward(const Variable& x) {
  Variable out = bn1_->forward_relu((*conv1_)(x));
  out = bn2_->forward_relu((*conv2_)(out));
  out = (*conv3_)(out);
  return bn3_->forward_relu(out, projection_ ? (*projection_)(x) : x);
}

}  // namespace models
}  // namespace tessera
