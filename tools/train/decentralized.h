// --strategy=gossip: decentralized SGD (dist/gossip/gossip.h). Every rank keeps its own model,
// averages it with its neighbours' each step (--gossip-topology=ring|exponential) and steps on its
// own gradient; nothing is all-reduced during training. Evaluation and checkpoints use the
// ranks' average model (all-reduced before each evaluation; the JSON says so and reports the
// consensus distance, mean over ranks of ||w_i - mean w||^2, measured there).
#pragma once

#include <memory>

#include "dist/process_group.h"
#include "nn/sequential.h"
#include "tools/train/flags.h"
#include "tools/train/precision.h"
#include "tools/train/strategy.h"

namespace tessera {
namespace train {

std::unique_ptr<Strategy> make_decentralized(const Config& config,
                                             std::shared_ptr<nn::Sequential> model,
                                             std::shared_ptr<dist::ProcessGroup> world,
                                             Criterion criterion, MixedPrecision& precision);

}  // namespace train
}  // namespace tessera
