// Models: parameter counts against the papers' architectures, output shapes, the option-A
// shortcut, and that every model is a Sequential of blocks.
#include <gtest/gtest.h>

#include "autograd/functions.h"
#include "models/resnet.h"
#include "models/resnet_blocks.h"
#include "models/simple.h"
#include "tensor/ops.h"

namespace tessera {
namespace models {
namespace {

TEST(Models, SmallModels) {
  auto lr = LogisticRegression();
  EXPECT_EQ(lr->num_parameters(), 784 * 10 + 10);
  auto mlp = MLP();
  EXPECT_EQ(mlp->num_parameters(), 784 * 256 + 256 + 256 * 10 + 10);
  EXPECT_EQ(mlp->forward(Variable(randn({3, 1, 28, 28}))).shape(), (Shape{3, 10}));
}

TEST(Models, ResNet20MatchesThePaper) {
  EXPECT_EQ(ResNet20(1)->num_parameters(), 269434);
  EXPECT_EQ(ResNet20(3)->num_parameters(), 269722);  // the stem sees 3 channels: +288
  auto model = ResNet20(1);
  EXPECT_EQ(model->size(), 11u);  // stem, 9 blocks, head
  EXPECT_EQ(model->name_at(0), "stem");
  EXPECT_EQ(model->name_at(10), "head");
  EXPECT_EQ(model->forward(Variable(randn({2, 1, 28, 28}))).shape(), (Shape{2, 10}));
  EXPECT_EQ(ResNet56(1)->size(), 29u);
  EXPECT_THROW(ResNetCifar(21), Error);
}

TEST(Models, ImageNetResNetsHaveTorchvisionParameterCounts) {
  // torchvision: resnet18 11,689,512; resnet34 21,797,672; resnet50 25,557,032 (1000 classes).
  EXPECT_EQ(ResNet18()->num_parameters(), 11689512);
  EXPECT_EQ(ResNet34()->num_parameters(), 21797672);
  EXPECT_EQ(ResNet50()->num_parameters(), 25557032);
  EXPECT_EQ(ResNet18(1, 10)->forward(Variable(randn({2, 1, 28, 28}))).shape(), (Shape{2, 10}));
}

TEST(Models, OptionAShortcutSubsamplesAndPadsWithZeros) {
  const Variable x(arange(0, 2 * 16, 1, kF32).view({1, 2, 4, 4}));
  const Variable y = shortcut_a(x, 4, 2);
  EXPECT_EQ(y.shape(), (Shape{1, 4, 2, 2}));
  EXPECT_EQ(y.data().select(1, 0).to_vector<float>(), (std::vector<float>{0, 0, 0, 0}));
  EXPECT_EQ(y.data().select(1, 1).to_vector<float>(), (std::vector<float>{0, 2, 8, 10}));
  EXPECT_EQ(y.data().select(1, 2).to_vector<float>(), (std::vector<float>{16, 18, 24, 26}));
  EXPECT_EQ(y.data().select(1, 3).to_vector<float>(), (std::vector<float>{0, 0, 0, 0}));
}

}  // namespace
}  // namespace models
}  // namespace tessera
