// Sequential made from a list of layers: temporaries moved in (their weights kept), shared_ptrs
// shared, positional names, the forward against the layers' arithmetic written out; moving a
// layer others refer to is refused. Beside it, what calling a model on a batch needs: a Tensor
// argument, num_correct of a Variable, MSELoss with a data target.
#include "nn/sequential.h"

#include <gtest/gtest.h>

#include "nn/nn.h"
#include "tensor/ops.h"
#include "tensor/random.h"
#include "tests/util/expect_error.h"

namespace tessera {
namespace nn {
namespace {

std::vector<std::string> names(const std::vector<std::pair<std::string, Variable>>& items) {
  std::vector<std::string> out;
  for (const auto& [name, v] : items) out.push_back(name);
  return out;
}

// x W^T + b, by hand.
Tensor affine(const Tensor& x, const Linear& l) {
  return add(matmul(x, l.weight().data().transpose(0, 1)), l.bias().data());
}

TEST(Sequential, FromTemporariesKeepsTheirWeightsAndComputesTheChain) {
  manual_seed(3);
  Linear first(4, 3), second(3, 2);  // the same draws the temporaries below get
  manual_seed(3);
  Sequential net{Linear(4, 3), ReLU(), Linear(3, 2)};
  EXPECT_EQ(net.size(), 3u);
  EXPECT_EQ(names(net.named_parameters()),
            (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
  EXPECT_EQ(net[1]->type_name(), "ReLU");
  const auto& fc1 = dynamic_cast<const Linear&>(*net[0]);
  EXPECT_EQ(max_abs_diff(fc1.weight().data(), first.weight().data()), 0);
  // The moved layer's own members and its registered parameters are one Variable.
  EXPECT_TRUE(fc1.weight().is_same(net.parameters()[0]));

  const Tensor x = randn({5, 4});
  const Tensor expected = affine(relu(affine(x, first)), second);
  EXPECT_LT(max_abs_diff(net(x).data(), expected), 1e-6);
  EXPECT_LT(max_abs_diff(net(Variable(x)).data(), expected), 1e-6);  // Tensor == Variable call
}

TEST(Sequential, SharedPointersAreSharedAndMixWithTemporaries) {
  auto head = std::make_shared<Linear>(8, 2);
  auto net = std::make_shared<Sequential>(Linear(4, 8), std::make_shared<ReLU>(), head);
  EXPECT_EQ(net->size(), 3u);
  EXPECT_EQ((*net)[2].get(), head.get());
  EXPECT_TRUE(net->parameters()[2].is_same(head->weight()));
  // The initializer-list form of shared_ptrs only still works.
  Sequential old{std::make_shared<Linear>(4, 8), head};
  EXPECT_EQ(old[1].get(), head.get());
}

TEST(Sequential, PushBackNamesATemporaryOrNumbersIt) {
  Sequential net;
  net.push_back("fc", Linear(4, 3));
  net.push_back(Tanh());
  net.push_back("head", std::make_shared<Linear>(3, 1));
  EXPECT_EQ(net.name_at(0), "fc");
  EXPECT_EQ(net.name_at(1), "1");
  EXPECT_EQ(names(net.named_parameters()),
            (std::vector<std::string>{"fc.weight", "fc.bias", "head.weight", "head.bias"}));
}

TEST(Sequential, MovingALayerOthersReferToIsAnError) {
  auto held = std::make_shared<Linear>(4, 3);
  testing::expect_error([&] { Sequential net{std::move(*held)}; },
                        "Linear held by a shared_ptr cannot be moved");
  EXPECT_EQ(held->parameters().size(), 2u);  // untouched by the refused move
  Linear hooked(4, 3);
  hooked.register_forward_pre_hook([](Module&) {});
  testing::expect_error([&] { Sequential net{std::move(hooked)}; },
                        "Linear with forward hooks cannot be moved");
  EXPECT_EQ(hooked.parameters().size(), 2u);
}

TEST(Metrics, NumCorrectTakesAModelsOutput) {
  const Variable logits(from_vector<float>({0.1f, 0.9f, 0.8f, 0.2f, 0.3f, 0.7f}, {3, 2}));
  EXPECT_EQ(num_correct(logits, from_vector<int64_t>({1, 0, 0}, {3})), 2);
}

TEST(Loss, MSELossTakesATensorTarget) {
  const Variable y(from_vector<float>({1.f, 2.f, 4.f}, {3}));
  const Tensor t = from_vector<float>({0.f, 2.f, 1.f}, {3});
  EXPECT_NEAR(MSELoss()(y, t).item(), (1.0 + 0.0 + 9.0) / 3, 1e-6);
  EXPECT_NEAR(MSELoss(Reduction::kSum)(y, t).item(), 10.0, 1e-6);
}

}  // namespace
}  // namespace nn
}  // namespace tessera
