#include "tools/train/save_model.h"

#include "tensor/safetensors.h"

namespace tessera {
namespace train {

void save_trained_model(const RunContext& run) {
  if (run.config.save_model.empty()) return;
  const StateDict state = run.strategy.model_state(run.model);  // collective
  if (!run.lead) return;
  save_safetensors(run.config.save_model, state,
                   {{"model", run.config.model}, {"strategy", run.config.strategy}});
}

}  // namespace train
}  // namespace tessera
