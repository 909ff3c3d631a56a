#include "autograd/recompute.h"

#include "autograd/autocast.h"
#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "tensor/random.h"

namespace tessera {

namespace {

// What one recompute_output() call needs in backward: owned by the node of y (which
// backpropagates through the recomputation) until the engine releases it, and seen by the hook
// on the consumer's output (which recomputes).
struct Recomputation {
  UnaryFn fn;
  Variable x;
  GeneratorState rng;
  AutocastSettings autocast;
  Tensor y;  // its storage released after the consumer's forward; refilled by run()

  Variable x_detached, output;  // the recomputed graph, while it is needed

  // fn again on x, with its graph; the output copied back into y's storage.
  void run() {
    if (output.defined()) return;
    Generator& gen = default_generator();
    const GeneratorState now = gen.state();
    gen.set_state(rng);
    x_detached = Variable(x.data(), x.requires_grad());
    {
      EnableGradGuard grad_on;
      AutocastGuard autocast_guard(autocast);
      output = fn(x_detached);
    }
    gen.set_state(now);
    TS_CHECK(output.shape() == y.shape() && output.dtype() == y.dtype(),
             "recompute_output: the recomputed output is ", output.dtype(), " ", output.shape(),
             ", the first run's ", y.dtype(), " ", y.shape());
    y.storage()->materialize();
    y.copy_(output.data());
    output.set_data(y);  // the recomputed copy freed: y's bytes are the output now
  }
};

class RecomputedOutputBackward final : public Node {
 public:
  explicit RecomputedOutputBackward(std::shared_ptr<Recomputation> state)
      : Node(1), state_(std::move(state)) {}

  std::string name() const override { return "RecomputedOutputBackward"; }

  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    check_not_released();
    Recomputation& r = *state_;
    r.run();  // already done by the hook, unless the consumer's output got no gradient
    if (grads[0].defined() && r.output.requires_grad()) tessera::backward({r.output}, {grads[0]});
    Tensor grad_x = r.x_detached.requires_grad() ? r.x_detached.grad() : Tensor();
    // The graph is spent: a second backward (retain_graph) recomputes again.
    r.output = Variable();
    r.x_detached = Variable();
    return {grad_x};
  }

  void release_saved() override {
    Node::release_saved();
    state_.reset();
  }

 private:
  std::shared_ptr<Recomputation> state_;
};

}  // namespace

Variable recompute_output(const UnaryFn& fn, const Variable& x, const UnaryFn& consumer) {
  if (!GradMode::is_enabled()) return consumer(fn(x));
  auto state = std::make_shared<Recomputation>();
  state->fn = fn;
  state->x = x;
  state->rng = default_generator().state();
  state->autocast = autocast_settings();
  {
    NoGradGuard no_grad;
    state->y = fn(x).data();
  }
  // As checkpoint(): recorded even when x needs no gradient, for the parameters inside fn.
  auto node = std::make_shared<RecomputedOutputBackward>(state);
  node->set_next_edges({gradient_edge(x)});
  TS_CHECK(x.data().storage() != state->y.storage(),
           "recompute_output: fn returned a view of its input (shape ", x.shape(),
           "); there is nothing to recompute");
  const Variable z = consumer(Variable::from_node(state->y, node));
  if (!z.requires_grad()) return z;  // no backward will come: nothing to free or recompute
  TS_CHECK(z.data().storage() != state->y.storage(),
           "recompute_output: the consumer's output shares the recomputed output's storage "
           "(shape ", z.shape(), "); freeing it would free the result");
  state->y.storage()->release();
  // Weak: once y's node has run and released its state (backward done with it), x and y go.
  z.register_hook([weak = std::weak_ptr<Recomputation>(state)](Tensor&) {
    if (const auto state = weak.lock()) state->run();
  });
  return z;
}

}  // namespace tessera
