// What stops a run early, on every rank together, so that no rank trains on alone or hangs:
//   - at start-up, ranks whose flags, model or data differ (dist/settings_check.h), each told
//     which setting differs and its value on every rank;
//   - at every step, the NaN guard: a loss, or a gradient norm, that is inf or NaN stops the
//     run before the optimizer steps on it and before the epoch's checkpoint could overwrite
//     the last good one.
#pragma once

#include <cstdint>

#include "dist/process_group.h"
#include "nn/module.h"
#include "optim/optimizer.h"
#include "tools/train/data.h"
#include "tools/train/flags.h"

namespace tessera {
namespace train {

// Collective over the world.
void verify_configuration(const Config& config, const nn::Module& model, const Data& data,
                          dist::ProcessGroup& world);

// Collective when `world` is not null: one number all-reduced per step, which carries both
// checks. Throws naming the epoch and the batch when, on any rank, the loss is not finite or
// (with `gradients` given) the norm of the gradients this rank holds
// (Strategy::local_gradient_norm) is not. Pass no gradients under loss scaling: an overflowing fp16 step
// is the scaler's business (it skips the step and lowers the scale).
class Strategy;  // strategy.h

void check_finite_step(double loss, Strategy* gradients, int64_t epoch, int64_t batch,
                       int64_t batches, const Config& config, dist::ProcessGroup* world);

}  // namespace train
}  // namespace tessera
