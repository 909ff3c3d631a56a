// Module: registration order and dotted names, train/eval, to(dtype), state_dict round trips
// and strict loading errors.
#include "nn/module.h"

#include <gtest/gtest.h>

#include "nn/nn.h"
#include "tensor/ops.h"
#include "tests/util/expect_error.h"
#include "tests/util/relabel.h"

namespace tessera {
namespace nn {
namespace {

class Block : public Module {
 public:
  Block() {
    conv = register_module("conv", std::make_shared<Conv2d>(Conv2dOptions(2, 3, 3).padding(1)));
    bn = register_module("bn", std::make_shared<BatchNorm2d>(3));
    scale = register_parameter("scale", ones({1}));
  }
  std::string type_name() const override { return "Block"; }
  Variable forward(const Variable& x) override { return bn->forward(conv->forward(x)) * scale; }
  std::shared_ptr<Conv2d> conv;
  std::shared_ptr<BatchNorm2d> bn;
  Variable scale;
};

std::vector<std::string> names(const std::vector<std::pair<std::string, Variable>>& items) {
  std::vector<std::string> out;
  for (const auto& [name, v] : items) out.push_back(name);
  return out;
}

TEST(Module, NamedParametersAreRecursiveDottedAndInRegistrationOrder) {
  Sequential model{std::make_shared<Block>(), std::make_shared<Flatten>(),
                   std::make_shared<Linear>(48, 10)};
  EXPECT_EQ(names(model.named_parameters()),
            (std::vector<std::string>{"0.scale", "0.conv.weight", "0.conv.bias", "0.bn.weight",
                                      "0.bn.bias", "2.weight", "2.bias"}));
  EXPECT_EQ(names(model.named_buffers()),
            (std::vector<std::string>{"0.bn.running_mean", "0.bn.running_var",
                                      "0.bn.num_batches_tracked"}));
  EXPECT_EQ(model.num_parameters(), 1 + 3 * 2 * 9 + 3 + 3 + 3 + 48 * 10 + 10);
  EXPECT_EQ(model.parameters()[1].name(), "weight");
  EXPECT_EQ(model.named_modules().size(), 6u);  // Sequential, Block, Conv2d, BN, Flatten, Linear
}

// register_module<M>(name, args...) as a member's initializer: made, named and registered in
// declaration order; the pointer form still takes an already made module; calling a module runs
// its forward hooks, calling forward() does not.
struct MemberNet : nn::Module {
  Variable forward(const Variable& x) override { return (*fc2)((*fc1)(x)); }
  std::shared_ptr<nn::Linear> fc1 = register_module<nn::Linear>("fc1", 4, 3);
  std::shared_ptr<nn::Linear> fc2 = register_module<nn::Linear>("fc2", 3, 2, /*bias=*/false);
  std::shared_ptr<nn::ReLU> relu = register_module<nn::ReLU>("relu", std::make_shared<nn::ReLU>());
};

TEST(Module, RegisterModuleMakesNamesAndRegistersInOneLine) {
  MemberNet net;
  std::vector<std::string> names;
  for (const auto& [name, p] : net.named_parameters()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight"}));
  EXPECT_EQ(net.fc2->weight().shape(), (Shape{2, 3}));
  EXPECT_EQ(net.named_children().size(), 3u);
  int calls = 0;
  net.fc1->register_forward_pre_hook([&](nn::Module&) { ++calls; });
  net(Variable(zeros({5, 4})));
  EXPECT_EQ(calls, 1);  // (*fc1)(x) inside forward ran the hook
  net.fc1->forward(Variable(zeros({5, 4})));
  EXPECT_EQ(calls, 1);  // forward() alone skips it
}

TEST(Module, DuplicateAndDottedNamesAreRejected) {
  Block b;
  EXPECT_THROW(b.register_parameter("scale", ones({1})), Error);
  EXPECT_THROW(b.register_buffer("a.b", ones({1})), Error);
  EXPECT_THROW(b.register_module("conv", std::make_shared<ReLU>()), Error);
}

TEST(Module, TrainEvalRecurse) {
  Sequential model{std::make_shared<Block>(), std::make_shared<Dropout>(0.5)};
  model.eval();
  EXPECT_FALSE(model[0]->is_training());
  EXPECT_FALSE(std::static_pointer_cast<Block>(model[0])->bn->is_training());
  model.train();
  EXPECT_TRUE(model[1]->is_training());
}

TEST(Module, ToDtypeConvertsFloatingTensorsInPlaceForEveryHolder) {
  auto block = std::make_shared<Block>();
  Variable held = block->conv->weight();  // a handle taken before the conversion
  block->to(kF64);
  EXPECT_EQ(held.dtype(), kF64);
  EXPECT_EQ(block->bn->running_var().dtype(), kF64);
  EXPECT_EQ(block->state_dict().at("bn.num_batches_tracked").dtype(), kI64);
  Variable y = block->forward(Variable(randn({2, 2, 4, 4}, kF64)));
  EXPECT_EQ(y.dtype(), kF64);
}

TEST(Module, StateDictRoundTrip) {
  manual_seed(1);
  Block a;
  manual_seed(2);
  Block b;
  EXPECT_GT(max_abs_diff(a.conv->weight().data(), b.conv->weight().data()), 0);
  a.forward(Variable(randn({4, 2, 3, 3})));  // moves running stats
  b.load_state_dict(a.state_dict());
  for (const auto& [name, t] : a.state_dict()) {
    EXPECT_EQ(max_abs_diff(t, b.state_dict().at(name)), 0) << name;
  }
  // Loading copies values: b's tensors stay b's own.
  EXPECT_NE(a.conv->weight().data().storage(), b.conv->weight().data().storage());
}

TEST(Module, StrictLoadListsMissingUnexpectedAndMismatchedKeys) {
  Block a;
  StateDict state = a.state_dict();
  state.erase("conv.bias");
  state.set("extra.weight", ones({1}));
  try {
    a.load_state_dict(state);
    FAIL();
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("missing keys [conv.bias]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("unexpected keys [extra.weight]"), std::string::npos) << msg;
  }
  a.load_state_dict(state, /*strict=*/false);  // fine without strictness
  StateDict bad = a.state_dict();
  bad.set("scale", ones({2}));
  try {
    a.load_state_dict(bad);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("scale (checkpoint [2], model [1])"), std::string::npos)
        << e.what();
  }
}

TEST(Module, ZeroGradAndSharedParameters) {
  auto shared = std::make_shared<Linear>(3, 3);
  Sequential twice{shared, shared};
  EXPECT_EQ(twice.parameters().size(), 2u);  // listed once
  sum(twice.forward(Variable(ones({1, 3})))).backward();
  EXPECT_TRUE(shared->weight().grad().defined());
  twice.zero_grad();
  EXPECT_FALSE(shared->weight().grad().defined());
}

// A tied parameter (GPT-2's lm_head reading the token embedding): used by the tying module,
// listed, converted and saved by its owner only, and found in the tree through
// named_tied_parameters().
TEST(Module, TiedParametersBelongToTheirOwnerAndAreListedAsTies) {
  struct Head : Module {
    explicit Head(const Variable& w) : weight(register_tied_parameter("weight", w)) {}
    Variable forward(const Variable& x) override { return linear(x, weight, Variable()); }
    Variable weight;
  };
  auto embedding = std::make_shared<Embedding>(5, 3);
  auto head = std::make_shared<Head>(embedding->weight());
  Sequential model;
  model.push_back("embed", embedding);
  model.push_back("head", head);
  EXPECT_TRUE(head->parameters().empty());
  ASSERT_EQ(model.named_parameters().size(), 1u);
  EXPECT_EQ(model.named_parameters()[0].first, "embed.weight");
  const auto ties = model.named_tied_parameters();
  ASSERT_EQ(ties.size(), 1u);
  EXPECT_EQ(ties[0].first, "head.weight");
  EXPECT_TRUE(ties[0].second.is_same(embedding->weight()));
  const StateDict state = model.state_dict();
  EXPECT_TRUE(state.contains("embed.weight"));
  EXPECT_FALSE(state.contains("head.weight"));
  model.to(kF64);  // once, by the owner: the tie sees it
  EXPECT_EQ(head->weight.dtype(), kF64);
  // Both uses sum into the owner's gradient.
  sum(model.forward(Variable(from_vector(std::vector<int64_t>{1, 3}, {2})))).backward();
  EXPECT_TRUE(embedding->weight().grad().defined());
  testing::expect_error([&] { head->register_tied_parameter("weight", embedding->weight()); },
                        "'weight' is already registered");
  testing::expect_error([&] { head->register_tied_parameter("w2", Variable(ones({2}))); },
                        "must be another module's parameter");
}

TEST(Sequential, SliceSharesLayersAndKeepsNames) {
  Sequential model{std::make_shared<Linear>(4, 4), std::make_shared<ReLU>(),
                   std::make_shared<Linear>(4, 2)};
  auto tail = model.slice(1, 3);
  EXPECT_EQ(tail->size(), 2u);
  EXPECT_EQ(names(tail->named_parameters()), (std::vector<std::string>{"2.weight", "2.bias"}));
  EXPECT_TRUE(tail->parameters()[0].is_same(model.parameters()[2]));
  const Variable x(randn({3, 4}));
  const Variable h = model.slice(0, 1)->forward(x);
  EXPECT_EQ(max_abs_diff(tail->forward(h).data(), model.forward(x).data()), 0);
  EXPECT_THROW(model.slice(2, 4), Error);
  EXPECT_THROW(model[3], Error);
}

TEST(Module, PrintsTheTree) {
  Sequential model{std::make_shared<Linear>(4, 2)};
  EXPECT_EQ(model.str(), "Sequential\n  (0): Linear(in_features=4, out_features=2, bias=true)\n");
}

// A user's module: only a constructor and forward, no type_name.
struct UserNet : Module {
  UserNet() { fc = register_module("fc", std::make_shared<Linear>(4, 3)); }
  Variable forward(const Variable& x) override { return fc->forward(x); }
  std::shared_ptr<Linear> fc;
};

// Holds a layer without registering it (a common first mistake).
struct Unregistered : Module {
  std::shared_ptr<Linear> fc = std::make_shared<Linear>(4, 3);
};

TEST(Module, TypeNameDefaultsToTheClassName) {
  EXPECT_EQ(UserNet().type_name(), "UserNet");
  EXPECT_EQ(Linear(2, 2).type_name(), "Linear");
  EXPECT_EQ(Unregistered().type_name(), "Unregistered");
}

TEST(Module, AnyModuleWithForwardIsALayer) {
  auto net = std::make_shared<UserNet>();
  Sequential model{net, std::make_shared<ReLU>()};  // a user module inside Sequential
  const Variable x(ones({2, 4}));
  EXPECT_EQ(model.forward(x).shape(), (Shape{2, 3}));
  EXPECT_EQ((*net)(x).shape(), (Shape{2, 3}));
  try {
    Unregistered().forward(x);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Unregistered has no forward"), std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(Unregistered().parameters().empty());  // why optimizers name register_module
}

TEST(Module, SaveAndLoadWeightsIsOneCallEach) {
  const std::string path = ::testing::TempDir() + "/weights.safetensors";
  manual_seed(3);
  UserNet a;
  save_weights(a, path);
  manual_seed(4);
  UserNet b;
  EXPECT_GT(max_abs_diff(a.fc->weight().data(), b.fc->weight().data()), 0);
  load_weights(b, path);
  EXPECT_EQ(max_abs_diff(a.fc->weight().data(), b.fc->weight().data()), 0);
  EXPECT_EQ(max_abs_diff(a.fc->bias().data(), b.fc->bias().data()), 0);
  Linear wrong(3, 3);
  EXPECT_THROW(load_weights(wrong, path), Error);  // names match, shapes do not
}

// A file whose tensor has another shape, or a dtype of another kind (an f32 weight relabelled
// i32: the same bytes read as integers), is an error naming the file, the tensor and both
// shapes or dtypes, and leaves the module untouched; a precision within the kind converts.
TEST(Module, LoadWeightsChecksShapesAndDtypeKinds) {
  const std::string path = ::testing::TempDir() + "/kinds.safetensors";
  const std::string bad = ::testing::TempDir() + "/kinds_relabelled.safetensors";
  manual_seed(3);
  Linear a(4, 2);
  save_weights(a, path);
  Linear b(4, 2);
  const Tensor before = b.weight().data().clone();

  testing::relabel(path, bad, "weight", "I32");
  testing::expect_error([&] { load_weights(b, bad); },
                        "load_weights: '" + bad + "': load_state_dict: dtype of another kind for "
                        "[weight (checkpoint i32, model f32)]");
  EXPECT_EQ(max_abs_diff(b.weight().data(), before), 0);  // untouched

  Linear wider(5, 2);
  testing::expect_error([&] { load_weights(wider, path); },
                        "load_weights: '" + path + "': load_state_dict: shape mismatch for "
                        "[weight (checkpoint [2, 4], model [2, 5])]");

  // The same checks in load_state_dict itself; f16 into f32 converts.
  StateDict state = a.state_dict();
  state.set("bias", zeros({2}, kI64));
  testing::expect_error([&] { b.load_state_dict(state); }, "bias (checkpoint i64, model f32)");
  state.set("bias", a.bias().data().to(kF16));
  b.load_state_dict(state);
  EXPECT_EQ(max_abs_diff(b.weight().data(), a.weight().data()), 0);
}

TEST(Module, HalfPrecisionKeepsBatchNormInF32) {
  for (DType half : {kBF16, kF16}) {
    Sequential model{std::make_shared<Block>(), std::make_shared<Flatten>(),
                     std::make_shared<Linear>(48, 10)};
    model.to(half);
    for (const auto& [name, p] : model.named_parameters()) {
      const bool bn = name.find(".bn.") != std::string::npos;
      EXPECT_EQ(p.dtype(), bn ? kF32 : half) << name;
    }
    for (const auto& [name, b] : model.named_buffers()) {
      if (is_floating(b.dtype())) {
        EXPECT_EQ(b.dtype(), kF32) << name;
      }
    }
    const Variable y = model.forward(Variable(ones({2, 2, 4, 4}, half)));  // half in, BN in f32
    EXPECT_EQ(y.shape(), (Shape{2, 10}));
    model.to(kF64);  // any other dtype converts BatchNorm too
    for (const auto& [name, p] : model.named_parameters()) EXPECT_EQ(p.dtype(), kF64) << name;
  }
}

TEST(Metrics, AccuracyCountsArgmaxHits) {
  const Tensor logits = from_vector<float>({0.1f, 0.9f, 0.8f, 0.2f, 0.3f, 0.7f}, {3, 2});
  const Tensor targets = from_vector<int64_t>({1, 1, 1}, {3});
  EXPECT_EQ(num_correct(logits, targets), 2);
  EXPECT_DOUBLE_EQ(accuracy(logits, targets), 2.0 / 3.0);
  EXPECT_THROW(accuracy(logits, from_vector<int64_t>({1, 1}, {2})), Error);
}

// operator() runs the forward hooks around forward(): pre-hooks first, in registration order,
// then hooks, each seeing (and able to replace) the output; Sequential calls its layers
// through them; forward() itself skips them; removed hooks stop; a bad handle is named.
TEST(Module, ForwardHooksRunAroundForwardThroughCallsAndSequential) {
  auto linear = std::make_shared<Linear>(3, 2);
  auto seq = std::make_shared<Sequential>();
  seq->push_back(linear);
  std::vector<std::string> calls;
  const int pre = linear->register_forward_pre_hook([&](Module& m) {
    EXPECT_EQ(&m, linear.get());
    calls.push_back("pre");
  });
  const int post = linear->register_forward_hook([&](Module&, const Variable& out) {
    calls.push_back("post");
    return Variable(mul(out.data(), 2.0));  // replaces the output
  });
  const Variable x(ones({1, 3}));
  const Tensor plain = linear->forward(x).data();
  EXPECT_TRUE(calls.empty());  // forward() skips the hooks
  const Tensor hooked = (*seq)(x).data();
  EXPECT_EQ(calls, (std::vector<std::string>{"pre", "post"}));
  EXPECT_LT(max_abs_diff(hooked, mul(plain, 2.0)), 1e-7);
  linear->remove_forward_hook(pre);
  linear->remove_forward_hook(post);
  calls.clear();
  EXPECT_LT(max_abs_diff((*seq)(x).data(), plain), 1e-7);
  EXPECT_TRUE(calls.empty());
  try {
    linear->remove_forward_hook(post);
    FAIL() << "removing a hook twice was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("no hook with handle " + std::to_string(post)),
              std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace nn
}  // namespace tessera
