// Every layer on CUDA against the same layer on the CPU, from the same weights and inputs:
// the output, the input's gradient and every parameter's gradient (f32; the random output
// gradient makes every path count). Dropout is compared in training mode too: the same seed
// draws the same mask on both devices. Skips, naming the reason, without CUDA or a GPU.
#include <gtest/gtest.h>

#include <functional>

#include "nn/nn.h"
#include "tensor/accelerator.h"
#include "tensor/ops.h"

namespace tessera {
namespace nn {
namespace {

using MakeLayer = std::function<std::shared_ptr<Module>()>;

struct Result {
  Tensor output, input_grad;
  std::vector<Tensor> param_grads;
};

Result run(const MakeLayer& make, const Tensor& x, const Tensor& g, Device device, bool train) {
  manual_seed(21);
  auto layer = make();
  layer->to(device);
  if (!train) layer->eval();
  Variable input(x.to(device), true);
  manual_seed(22);  // the same dropout mask on both devices
  Variable y = layer->forward(input);
  if (!g.defined()) return {y.data().cpu(), Tensor(), {}};  // forward only
  y.backward(g.to(device));
  Result r{y.data().cpu(), input.grad().cpu(), {}};
  for (const Variable& p : layer->parameters()) r.param_grads.push_back(p.grad().cpu());
  return r;
}

void expect_close(const Tensor& gpu, const Tensor& cpu, const std::string& what) {
  ASSERT_EQ(gpu.shape(), cpu.shape()) << what;
  EXPECT_TRUE(allclose(gpu, cpu, 1e-4, 1e-5))
      << what << ": max |diff| " << amax(abs(gpu.to(kF64) - cpu.to(kF64))).item();
}

TEST(CudaLayers, EveryLayerMatchesTheCpuForwardAndBackward) {
  if (!cuda_is_available()) GTEST_SKIP() << "no CUDA: " << cuda_unavailable_reason();
  const std::vector<std::pair<std::string, MakeLayer>> layers = {
      {"Linear", [] { return std::make_shared<Linear>(6 * 5 * 5, 7); }},
      {"Conv2d", [] { return std::make_shared<Conv2d>(Conv2dOptions(6, 4, 3).padding(1)); }},
      {"Conv2d grouped strided", [] {
         return std::make_shared<Conv2d>(Conv2dOptions(6, 4, 3).stride(2).groups(2).bias(false));
       }},
      {"BatchNorm2d", [] { return std::make_shared<BatchNorm2d>(6); }},
      {"ReLU", [] { return std::make_shared<ReLU>(); }},
      {"Sigmoid", [] { return std::make_shared<Sigmoid>(); }},
      {"Tanh", [] { return std::make_shared<Tanh>(); }},
      {"MaxPool2d", [] { return std::make_shared<MaxPool2d>(Pool2dOptions(2)); }},
      {"AvgPool2d", [] {
         return std::make_shared<AvgPool2d>(Pool2dOptions(3).stride(2).padding(1));
       }},
      {"AdaptiveAvgPool2d", [] { return std::make_shared<AdaptiveAvgPool2d>(2); }},
      {"Flatten", [] { return std::make_shared<Flatten>(); }},
      {"Dropout", [] { return std::make_shared<Dropout>(0.3); }},
      {"LayerNorm", [] { return std::make_shared<LayerNorm>(5); }},  // over the last dim, W = 5
      {"GELU", [] { return std::make_shared<GELU>(); }},
      {"GELU tanh", [] { return std::make_shared<GELU>(GeluApproximate::kTanh); }},
  };
  Generator gen(20);
  const Tensor x4 = normal({3, 6, 5, 5}, 0, 1, kF32, &gen);
  for (const auto& [name, make] : layers) {
    for (bool train : {true, false}) {
      const Tensor x = name == "Linear" ? x4.reshape({3, 150}) : x4;
      const Shape out_shape = run(make, x, Tensor(), Device::cpu(), train).output.shape();
      const Tensor g = normal(out_shape, 0, 1, kF32, &gen);
      const Result cpu = run(make, x, g, Device::cpu(), train);
      const Result gpu = run(make, x, g, Device::cuda(0), train);
      const std::string what = name + (train ? " (train)" : " (eval)");
      expect_close(gpu.output, cpu.output, what + " output");
      expect_close(gpu.input_grad, cpu.input_grad, what + " input grad");
      ASSERT_EQ(gpu.param_grads.size(), cpu.param_grads.size()) << what;
      for (size_t i = 0; i < cpu.param_grads.size(); ++i) {
        expect_close(gpu.param_grads[i], cpu.param_grads[i], what + " param grad " +
                                                                 std::to_string(i));
      }
    }
  }
}

// Embedding takes token ids, not a differentiable input: its output and its weight's gradient,
// with repeated tokens, and tied to an output projection as in a GPT.
TEST(CudaLayers, EmbeddingMatchesTheCpuForwardAndBackward) {
  if (!cuda_is_available()) GTEST_SKIP() << "no CUDA: " << cuda_unavailable_reason();
  const Tensor ids = from_vector<int64_t>({4, 17, 4, 0, 99, 17, 4, 63}, {2, 4});
  Generator gen(23);
  const Tensor g = normal({2, 4, 100}, 0, 1, kF32, &gen);
  std::vector<Tensor> outputs, grads;
  for (const Device device : {Device::cpu(), Device::cuda(0)}) {
    manual_seed(24);
    Embedding emb(100, 12);
    emb.to(device);
    const Variable h = emb(ids.to(device));
    const Variable logits = matmul(h, transpose(emb.weight(), 0, 1));  // tied
    logits.backward(g.to(device));
    outputs.push_back(logits.data().cpu());
    grads.push_back(emb.weight().grad().cpu());
  }
  expect_close(outputs[1], outputs[0], "Embedding (tied) output");
  expect_close(grads[1], grads[0], "Embedding (tied) weight grad");
}

}  // namespace
}  // namespace nn
}  // namespace tessera
