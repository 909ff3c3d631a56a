// How the train tool parallelizes a step: it only chooses. One process, DDP (the model wrapped,
// an ordinary optimizer) or ZeRO stage 1 or 2 (the model as it is, dist::ZeroRedundancyOptimizer
// as the optimizer); the library does the work.
#pragma once

#include <memory>

#include "dist/process_group.h"
#include "nn/sequential.h"
#include "optim/optimizer.h"
#include "tools/train/flags.h"

namespace tessera {
namespace train {

class Strategy {
 public:
  virtual ~Strategy() = default;
  // The training forward (DDP's, or the model's).
  virtual Variable forward(const Variable& x) = 0;
  // The optimizer: steps, zero_grad, the schedule's learning rate, checkpoints (state_dict is
  // collective for ZeRO: every rank must call it) and state bytes.
  virtual optim::Optimizer& optimizer() = 0;
};

// world is null for --strategy=single.
std::unique_ptr<Strategy> make_strategy(const Config& config, std::shared_ptr<nn::Sequential> model,
                                        std::shared_ptr<dist::ProcessGroup> world);

}  // namespace train
}  // namespace tessera
