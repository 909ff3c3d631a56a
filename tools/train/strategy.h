// How the train tool parallelizes a step: one process, DDP, or ZeRO-1. Each strategy owns the
// optimizer and knows what a training forward and an optimizer step mean for it.
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
  virtual Variable forward(const Variable& x) = 0;
  virtual void zero_grad() = 0;
  virtual void step() = 0;
  // The optimizer whose learning rate the schedule drives.
  virtual optim::Optimizer& scheduled_optimizer() = 0;
  // The full optimizer state (collective for ZeRO-1: every rank must call it).
  virtual StateDict optimizer_state() = 0;
  virtual void load_optimizer_state(const StateDict& state) = 0;
  // Optimizer-state bytes held by this rank.
  virtual int64_t optimizer_state_bytes() const = 0;
};

// world is null for --strategy=single.
std::unique_ptr<Strategy> make_strategy(const Config& config, std::shared_ptr<nn::Sequential> model,
                                        std::shared_ptr<dist::ProcessGroup> world);

}  // namespace train
}  // namespace tessera
