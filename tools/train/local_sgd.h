// --strategy=local-sgd: post-local SGD (dist/local_sgd/): DDP for --local-sgd-warmup steps,
// then every rank steps its own replica and the replicas are averaged every --sync-period=H
// steps; with --outer-optimizer=nesterov (DiLoCo) the round's mean change goes to an outer
// Nesterov SGD (--outer-lr, --outer-momentum) over a global copy instead. Evaluation and
// checkpoints use the ranks' average model (averaged_evaluation.h).
#pragma once

#include <memory>

#include "dist/process_group.h"
#include "nn/sequential.h"
#include "tools/train/flags.h"
#include "tools/train/precision.h"
#include "tools/train/strategy.h"

namespace tessera {
namespace train {

std::unique_ptr<Strategy> make_local_sgd(const Config& config, std::shared_ptr<nn::Sequential> model,
                                         std::shared_ptr<dist::ProcessGroup> world,
                                         Criterion criterion, MixedPrecision& precision);

}  // namespace train
}  // namespace tessera
