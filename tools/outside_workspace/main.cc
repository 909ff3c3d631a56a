// A user's program in a workspace of its own, built against @tessera//:tessera (see
// tools/outside_workspace_test.sh): a custom module trained a few steps on synthetic images,
// a custom differentiable op checked by gradcheck, and f16 elements read through tessera::Half.
#include <cstdio>

#include "tessera.h"

using namespace tessera;

// Layers declared, named and registered in one line each, and called through (*layer)(x), which
// runs their hooks as PyTorch's layer(x) does (README.md, examples/net.h).
struct TinyNet : nn::Module {
  Variable forward(const Variable& x) override { return (*fc2)(relu((*fc1)(flatten(x, 1)))); }
  std::shared_ptr<nn::Linear> fc1 = register_module<nn::Linear>("fc1", 28 * 28, 32);
  std::shared_ptr<nn::Linear> fc2 = register_module<nn::Linear>("fc2", 32, 10);
};

// cube(x) = x^3, with its backward 3 x^2 written by hand.
Variable cube(const Variable& x) {
  const Tensor y = mul(mul(x.data(), x.data()), x.data());
  return record("CubeBackward", y, {x}, [x](const Tensor& g) -> Grads {
    return {mul(g, mul(square(x.data()), 3.0))};
  });
}

int main() {
  manual_seed(0);
  auto model = std::make_shared<TinyNet>();
  optim::SGD opt(model->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  auto train = std::make_shared<data::SyntheticImages>(512, 1, 28, 28, 10, /*seed=*/1);
  data::DataLoader loader(train, data::DataLoaderOptions(64).shuffle(true));
  double first = 0, last = 0;
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    for (data::Batch& b : loader.epoch(epoch)) {
      Variable loss = cross_entropy((*model)(b.inputs), b.targets);
      opt.zero_grad();
      loss.backward();
      opt.step();
      if (first == 0) first = loss.item();
      last = loss.item();
    }
  }
  const GradcheckResult check =
      gradcheck([](const std::vector<Variable>& in) { return cube(in[0]); },
                {randn({5}, kF64)});
  // 2-byte floats: f16 elements are tessera::Half (tessera.h includes tensor/half.h).
  const Tensor halves = mul(ones({3}), 1.5).to(kF16);
  const bool half_ok = static_cast<float>(halves.data<Half>()[2]) == 1.5f;
  std::printf("%s: loss %.3f -> %.3f, gradcheck %s, f16 %s\n", model->type_name().c_str(), first,
              last, check.ok ? "ok" : check.message.c_str(), half_ok ? "ok" : "wrong");
  return last < first && check.ok && half_ok ? 0 : 1;
}
