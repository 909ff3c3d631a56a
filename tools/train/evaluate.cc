#include "tools/train/evaluate.h"

#include <cstdint>

#include "autograd/grad_mode.h"
#include "tensor/ops.h"

namespace tessera {
namespace train {

Evaluation evaluate(const RunContext& run, const data::DataLoader& loader) {
  NoGradGuard no_grad;
  run.model.eval();
  const bool lm = language_model(run.config);
  // Image models: correct predictions and examples. Language models: the summed token losses
  // (each batch's mean over its tokens, times its tokens, in f64) and the tokens.
  double score = 0, total = 0;
  for (data::Batch& b : loader.epoch(0)) {
    const Tensor outputs = run.strategy.predict(model_inputs(run, b.inputs));
    const Tensor targets = b.targets.to(run.device);
    if (lm) {
      // f32 logits (autocast gives bf16 or f16 ones): the loss as training's f32 cross-entropy,
      // the head's (under --tensor-parallel over the logits split by vocabulary, collective).
      const double mean = run.head.loss(Variable(outputs.to(kF32)), targets).item();
      score += mean * static_cast<double>(targets.numel());
      total += static_cast<double>(targets.numel());
    } else {
      const Tensor classes = run.head.predicted_classes(outputs);
      score += sum(eq(classes, targets)).item();
      total += b.size();
    }
  }
  run.model.train();
  dist::ProcessGroup* group = run.strategy.replica_group().get();
  if (group != nullptr) {
    Tensor sums = from_vector<double>({score, total}, {2});
    group->all_reduce(sums)->wait();
    score = sums.at({0});
    total = sums.at({1});
  }
  Evaluation e;
  const double mean = total > 0 ? score / total : 0.0;
  (lm ? e.loss : e.accuracy) = mean;
  return e;
}

}  // namespace train
}  // namespace tessera
