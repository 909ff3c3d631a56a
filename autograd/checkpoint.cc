#include "autograd/checkpoint.h"

#include "autograd/autocast.h"
#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "tensor/random.h"

namespace tessera {

namespace {

class CheckpointBackward final : public Node {
 public:
  CheckpointBackward(CheckpointFn fn, std::vector<Variable> inputs, GeneratorState rng,
                     AutocastSettings autocast, uint32_t num_outputs)
      : Node(num_outputs),
        fn_(std::move(fn)),
        inputs_(std::move(inputs)),
        rng_(rng),
        autocast_(autocast) {}

  std::string name() const override { return "CheckpointBackward"; }

  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    check_not_released();
    // Recompute the forward with the random stream and the autocast settings as they were the
    // first time.
    Generator& gen = default_generator();
    const GeneratorState now = gen.state();
    gen.set_state(rng_);
    std::vector<Variable> detached;
    for (const Variable& v : inputs_) detached.emplace_back(v.data(), v.requires_grad());
    std::vector<Variable> outputs;
    {
      EnableGradGuard grad_on;
      AutocastGuard autocast(autocast_);
      outputs = fn_(detached);
    }
    gen.set_state(now);
    TS_CHECK(outputs.size() == grads.size(), "checkpoint: the recomputed function returned ",
             outputs.size(), " outputs, the first run ", grads.size());
    std::vector<Variable> roots;
    std::vector<Tensor> root_grads;
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (grads[i].defined() && outputs[i].requires_grad()) {
        roots.push_back(outputs[i]);
        root_grads.push_back(grads[i]);
      }
    }
    if (!roots.empty()) tessera::backward(roots, root_grads);
    std::vector<Tensor> input_grads;
    for (const Variable& v : detached) input_grads.push_back(v.requires_grad() ? v.grad() : Tensor());
    return input_grads;
  }

  void release_saved() override {
    Node::release_saved();
    inputs_.clear();
  }

 private:
  CheckpointFn fn_;
  std::vector<Variable> inputs_;
  GeneratorState rng_;
  AutocastSettings autocast_;
};

}  // namespace

std::vector<Variable> checkpoint(const CheckpointFn& fn, const std::vector<Variable>& inputs) {
  const GeneratorState rng = default_generator().state();
  std::vector<Variable> outputs;
  {
    NoGradGuard no_grad;
    outputs = fn(inputs);
  }
  // Parameters inside fn may need gradients even when the inputs do not; recording the node
  // whenever grad mode is on keeps that case right (the inner backward finds them).
  if (!GradMode::is_enabled()) return outputs;
  auto node = std::make_shared<CheckpointBackward>(fn, inputs, rng, autocast_settings(),
                                                   static_cast<uint32_t>(outputs.size()));
  std::vector<Edge> edges;
  for (const Variable& v : inputs) edges.push_back(gradient_edge(v));
  node->set_next_edges(std::move(edges));
  std::vector<Variable> results;
  for (size_t i = 0; i < outputs.size(); ++i) {
    results.push_back(Variable::from_node(outputs[i].data(), node, static_cast<uint32_t>(i)));
  }
  return results;
}

Variable checkpoint(const std::function<Variable(const Variable&)>& fn, const Variable& input) {
  return checkpoint([fn](const std::vector<Variable>& in) { return std::vector<Variable>{fn(in[0])}; },
                    {input})[0];
}

}  // namespace tessera
