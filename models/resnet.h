// ResNets as Sequentials of blocks, so the pipeline can cut them between any two blocks:
//   [stem, block, block, ..., head]
//
// CIFAR-style (He et al. 2016, section 4.2): depth = 6n + 2; a 3x3 stem to 16 channels, then
// three stages of n BasicBlocks at 16, 32 and 64 channels (the first block of stages 2 and 3
// halves the resolution), option-A shortcuts, global average pooling and a linear classifier.
// ResNet-20 has 269,434 parameters for 1 input channel (269,722 for 3).
//
// ImageNet-style: a 7x7/2 stem with 3x3/2 max pooling, four stages at 64..512 channels with
// option-B shortcuts; ResNet-18/34 use BasicBlocks, ResNet-50 Bottlenecks.
//
// Convolutions start from kaiming-normal (fan_out, ReLU) as torchvision's; BN from (1, 0).
#pragma once

#include <memory>

#include "nn/sequential.h"

namespace tessera {
namespace models {

std::shared_ptr<nn::Sequential> ResNetCifar(int64_t depth, int64_t in_channels = 1,
                                            int64_t classes = 10);
inline std::shared_ptr<nn::Sequential> ResNet20(int64_t in_channels = 1, int64_t classes = 10) {
  return ResNetCifar(20, in_channels, classes);
}
inline std::shared_ptr<nn::Sequential> ResNet32(int64_t in_channels = 1, int64_t classes = 10) {
  return ResNetCifar(32, in_channels, classes);
}
inline std::shared_ptr<nn::Sequential> ResNet56(int64_t in_channels = 1, int64_t classes = 10) {
  return ResNetCifar(56, in_channels, classes);
}

// depth 18, 34 or 50.
std::shared_ptr<nn::Sequential> ResNetImageNet(int64_t depth, int64_t in_channels = 3,
                                               int64_t classes = 1000);
inline std::shared_ptr<nn::Sequential> ResNet18(int64_t in_channels = 3, int64_t classes = 1000) {
  return ResNetImageNet(18, in_channels, classes);
}
inline std::shared_ptr<nn::Sequential> ResNet34(int64_t in_channels = 3, int64_t classes = 1000) {
  return ResNetImageNet(34, in_channels, classes);
}
inline std::shared_ptr<nn::Sequential> ResNet50(int64_t in_channels = 3, int64_t classes = 1000) {
  return ResNetImageNet(50, in_channels, classes);
}

}  // namespace models
}  // namespace tessera
