// Parameters tied across stages found in the module tree (pipeline/tied_parameters.h): a last
// layer that registers the first layer as its own child (as PyTorch ties modules) holds the
// first layer's parameters, so the two stages both hold them, without any declaration. Which
// ranks hold what (owner, holders), literally, under plain and interleaved cuts; the pipeline
// against one process's gradient accumulation, the copies bit for bit equal.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

#include "autograd/functions.h"
#include "dist/environment.h"
#include "nn/nn.h"
#include "optim/sgd.h"
#include "pipeline/microbatch.h"
#include "pipeline/pipe.h"
#include "pipeline/tied_parameters.h"
#include "tensor/ops.h"
#include "tensor/random.h"

namespace tessera {
namespace pipeline {
namespace {

// Projects with the first layer's weight (no bias of its own): y = x W^T.
class TiedOutput : public nn::Module {
 public:
  explicit TiedOutput(std::shared_ptr<nn::Linear> first) : first_(register_module("first", first)) {}
  std::string type_name() const override { return "TiedOutput"; }
  Variable forward(const Variable& x) override { return linear(x, first_->weight(), Variable()); }

 private:
  std::shared_ptr<nn::Linear> first_;
};

// 0: Linear(8, 8) | 1: ReLU | 2: Linear(8, 8) | 3: Tanh | 4: TiedOutput (layer 0's weight).
std::shared_ptr<nn::Sequential> tied_model() {
  manual_seed(41);
  auto first = std::make_shared<nn::Linear>(8, 8);
  auto m = std::make_shared<nn::Sequential>();
  m->push_back(first);
  m->push_back(std::make_shared<nn::ReLU>());
  m->push_back(std::make_shared<nn::Linear>(8, 8));
  m->push_back(std::make_shared<nn::Tanh>());
  m->push_back(std::make_shared<TiedOutput>(first));
  return m;
}

Variable loss_fn(const Variable& out, const Tensor& y) { return cross_entropy(out, y); }

TEST(TiedParameters, FoundInTheModuleTreeWithTheirOwnersAndHolders) {
  auto model = tied_model();
  // Its parameters, each once: 0.weight, 0.bias, 2.weight, 2.bias.
  ASSERT_EQ(model->parameters().size(), 4u);
  // 2 stages, balance 3 | 2: layer 0 on rank 0, layer 4 on rank 1.
  const auto two = find_tied_parameters(*model, {3, 2}, 2, {});
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].name, "0.weight");
  EXPECT_EQ(two[1].name, "0.bias");
  EXPECT_EQ(two[0].owner, 0);
  EXPECT_EQ(two[0].holders, (std::vector<int>{0, 1}));
  // Interleaved, 2 ranks x 2 chunks, parts 2 | 1 | 1 | 1: layer 4 in part 3, on rank 1.
  EXPECT_EQ(find_tied_parameters(*model, {2, 1, 1, 1}, 2, {}).at(0).holders, (std::vector<int>{0, 1}));
  // One stage holds both uses: nothing is tied.
  EXPECT_TRUE(find_tied_parameters(*model, {5}, 1, {}).empty());
  // A declaration of a use already registered changes nothing.
  EXPECT_EQ(find_tied_parameters(*model, {3, 2}, 2, {{"0.weight", {"4"}}}).size(), 2u);
}

TEST(TiedParameters, APipelineOfAModuleTreeTieEqualsGradientAccumulation) {
  auto world = dist::world();
  if (world->size() != 2) GTEST_SKIP() << "2 stages";
  auto reference = tied_model();
  optim::SGD ref_opt(reference->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  Pipe pipe(tied_model(), world, loss_fn, PipeOptions().microbatches(4).schedule("zb-h1"));
  ASSERT_EQ(pipe.tied_parameters().size(), 2u);
  // Stage 0 holds layers 0 and 2 (4 parameters); stage 1 (Tanh, TiedOutput) only its copies of
  // layer 0's weight and bias, which it steps but does not own.
  EXPECT_EQ(pipe.parameters().size(), pipe.stage() == 0 ? 4u : 2u);
  EXPECT_EQ(pipe.owned_parameters().size(), pipe.stage() == 0 ? 4u : 0u);
  optim::SGD opt(pipe.parameters(), optim::SGDOptions(0.1).momentum(0.9));
  for (int step = 0; step < 3; ++step) {
    Generator g(60 + step);
    const Tensor x = randn({12, 8}, kF32, &g);
    const Tensor y = argmax(x, 1);
    ref_opt.zero_grad();
    for (const Microbatch& mb : split_microbatches(x, y, 4)) {
      (loss_fn(reference->forward(Variable(mb.input)), mb.target) * mb.weight).backward();
    }
    ref_opt.step();
    opt.zero_grad();
    pipe.train_step(x, y);
    opt.step();
  }
  const auto ref = reference->named_parameters();
  const auto mine = pipe.model()->named_parameters();
  for (size_t i = 0; i < ref.size(); ++i) {
    const bool held = std::any_of(pipe.parameters().begin(), pipe.parameters().end(),
                                  [&](const Variable& p) { return p.is_same(mine[i].second); });
    if (held) EXPECT_LT(max_abs_diff(mine[i].second.data(), ref[i].second.data()), 1e-6) << ref[i].first;
  }
  // The copies of layer 0's weight on both ranks: the same bits.
  Tensor w = pipe.tied_parameters()[0].variable.data().clone();
  Tensor theirs = w.clone();
  world->broadcast(theirs.view({theirs.numel()}), 1)->wait();
  EXPECT_EQ(max_abs_diff(w, theirs), 0);
}

}  // namespace
}  // namespace pipeline
}  // namespace tessera
