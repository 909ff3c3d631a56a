// parallelize_classifier against the same network without tensor parallelism (same seed, f64):
// the layer it returns is the one now in the model, holding this rank's classes; its loss
// equals cross_entropy on the full logits, and so do the gradients of the layers below the
// head (1e-10); argmax is over all classes; a loss made from the head with other options
// (sum, label smoothing) equals cross_entropy with them; bad paths and a gathered head are
// named. Run on 2 and 3 ranks (7 classes: 4 + 3 and 3 + 2 + 2).
#include "dist/tensor_parallel/class_parallel_head.h"

#include <gtest/gtest.h>

#include "autograd/functions.h"
#include "dist/environment.h"
#include "nn/nn.h"
#include "tensor/ops.h"
#include "tests/util/expect_error.h"

namespace tessera {
namespace dist {
namespace tensor_parallel {
namespace {

using testing::expect_error;
constexpr int64_t kClasses = 7;

std::shared_ptr<nn::Sequential> make_net() {
  manual_seed(4);
  auto net = std::make_shared<nn::Sequential>(nn::Linear(5, 6), nn::Tanh(), nn::Linear(6, kClasses));
  net->to(kF64);
  return net;
}

Tensor input() {
  Generator g(9);
  return randn({8, 5}, kF64, &g);
}

Tensor targets() { return from_vector<int64_t>({0, 1, 2, 3, 4, 5, 6, 3}, {8}); }

TEST(ParallelizeClassifier, LossGradientsAndPredictionsEqualThePlainNetwork) {
  auto group = dist::world();
  auto plain = make_net(), model = make_net();
  ClassParallelHead head = parallelize_classifier(*model, group);  // the last Linear: "2"
  EXPECT_EQ((*model)[2].get(), head.linear.get());
  const Slice s = slice_of(kClasses, group->size(), group->rank(), "test");
  EXPECT_EQ(head.linear->output_slice().start, s.start);
  EXPECT_EQ(head.loss.classes().length, s.length);
  EXPECT_EQ(head.loss.num_classes(), kClasses);

  const Variable ref = cross_entropy((*plain)(input()), targets());
  const Variable logits = (*model)(input());
  const Variable loss = head.loss(logits, targets());
  EXPECT_LT(std::abs(loss.item() - ref.item()), 1e-10);
  ref.backward();
  loss.backward();
  const auto& first = dynamic_cast<const nn::Linear&>(*(*model)[0]);
  const auto& plain_first = dynamic_cast<const nn::Linear&>(*(*plain)[0]);
  EXPECT_LT(max_abs_diff(first.weight().grad(), plain_first.weight().grad()), 1e-10);
  const auto& plain_head = dynamic_cast<const nn::Linear&>(*(*plain)[2]);
  EXPECT_LT(max_abs_diff(head.linear->weight().grad(),
                         plain_head.weight().grad().narrow(0, s.start, s.length)), 1e-10);

  const Tensor plain_classes = argmax((*plain)(input()).data(), 1);
  EXPECT_EQ(max_abs_diff(head.loss.argmax(logits).to(kF64), plain_classes.to(kF64)), 0);
  EXPECT_EQ(head.loss.num_correct(logits, targets()),
            static_cast<int64_t>(sum(eq(plain_classes, targets())).item()));
}

TEST(ParallelizeClassifier, ALossMadeFromTheHeadTakesItsOwnOptions) {
  auto group = dist::world();
  auto plain = make_net(), model = make_net();
  model->push_back("out", nn::Identity());  // the classifier need not be the last layer
  ClassParallelHead head = parallelize_classifier(*model, group, "2");
  ClassParallelCrossEntropy smoothed(*head.linear, Reduction::kSum, 0.2);
  const Variable ref = cross_entropy((*plain)(input()), targets(), Reduction::kSum, 0.2);
  EXPECT_LT(std::abs(smoothed((*model)(input()), targets()).item() - ref.item()), 1e-10);
  EXPECT_GT(std::abs(head.loss((*model)(input()), targets()).item() - ref.item()), 1e-3);
}

TEST(ParallelizeClassifier, BadPathsAndAGatheredHeadAreNamed) {
  auto group = dist::world();
  auto model = make_net();
  expect_error([&] { parallelize_classifier(*model, group, "1"); }, "'1' is a Tanh, not a Linear");
  expect_error([&] { parallelize_classifier(*model, group, "fc"); }, "no module 'fc'");
  nn::Sequential no_linear{nn::Tanh()};
  expect_error([&] { parallelize_classifier(no_linear, group); }, "has no Linear layer");
  ColumnParallelLinear gathered(6, kClasses, group, /*gather_output=*/true);
  expect_error([&] { ClassParallelCrossEntropy loss(gathered); }, "gathers its output");
}

}  // namespace
}  // namespace tensor_parallel
}  // namespace dist
}  // namespace tessera
