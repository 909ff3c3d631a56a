#include "tools/bench/pipeline_bench_model.h"

#include <string>

#include "autograd/functions.h"
#include "tensor/ops.h"

namespace tessera {
namespace bench {
namespace {

// A learned per-feature scale. In front of the first Linear it makes the first Linear's input
// require grad, so stage 0's backward runs the same three GEMMs per Linear (output, weight and
// input gradients) as every other stage's instead of two for its first: without it stage 0's
// backward of a micro-batch is one GEMM shorter (2% at 16 Linears a stage), and in GPipe's
// backward phase it then waits that difference at each of its M-1 gradient receives (M = 16:
// measured +0.02 idle on stage 0).
class Scale : public nn::Module {
 public:
  explicit Scale(int64_t width) : scale_(register_parameter("scale", ones({width}))) {}
  std::string type_name() const override { return "Scale"; }
  Variable forward(const Variable& x) override { return x * scale_; }

 private:
  Variable scale_;
};

}  // namespace

std::shared_ptr<nn::Sequential> balanced_model(int64_t width, int layers) {
  manual_seed(0);
  auto m = std::make_shared<nn::Sequential>();
  for (int i = 0; i < layers; ++i) {
    auto block = std::make_shared<nn::Sequential>();
    if (i == 0) block->push_back(std::make_shared<Scale>(width));
    block->push_back(std::make_shared<nn::Linear>(width, width));
    block->push_back(std::make_shared<nn::ReLU>());
    m->push_back(block);
  }
  return m;
}

}  // namespace bench
}  // namespace tessera
