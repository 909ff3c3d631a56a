#include "tools/train/evaluate.h"

#include <cstdint>

#include "autograd/grad_mode.h"
#include "tensor/ops.h"

namespace tessera {
namespace train {

double evaluate(const RunContext& run, const data::DataLoader& loader) {
  NoGradGuard no_grad;
  run.model.eval();
  int64_t correct = 0, total = 0;
  for (data::Batch& b : loader.epoch(0)) {
    const Tensor logits = run.strategy.predict(b.inputs.to(run.device).to(run.input_dtype));
    const Tensor classes = run.head.predicted_classes(logits);
    correct += static_cast<int64_t>(sum(eq(classes, b.targets.to(run.device))).item());
    total += b.size();
  }
  run.model.train();
  dist::ProcessGroup* group = run.strategy.replica_group().get();
  if (group != nullptr) {
    Tensor counts = from_vector<int64_t>({correct, total}, {2});
    group->all_reduce(counts)->wait();
    correct = static_cast<int64_t>(counts.at({0}));
    total = static_cast<int64_t>(counts.at({1}));
  }
  return total > 0 ? static_cast<double>(correct) / total : 0.0;
}

}  // namespace train
}  // namespace tessera
