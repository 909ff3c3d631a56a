// What stops a run early, on every rank together, so that no rank trains on alone or hangs:
//   - at start-up, ranks whose flags, model or data differ (dist/settings_check.h), each told
//     which setting differs and its value on every rank;
//   - at every step, the NaN guard: a loss that is inf or NaN stops the run before the epoch's
//     checkpoint could overwrite the last good one.
#pragma once

#include <cstdint>

#include "dist/process_group.h"
#include "nn/module.h"
#include "tools/train/data.h"
#include "tools/train/flags.h"

namespace tessera {
namespace train {

// Collective over the world.
void verify_configuration(const Config& config, const nn::Module& model, const Data& data,
                          dist::ProcessGroup& world);

// Collective when `world` is not null: one flag all-reduced per step. Throws naming the epoch
// and the batch when the loss is not finite on any rank.
void check_finite_loss(double loss, int64_t epoch, int64_t batch, int64_t batches,
                       const Config& config, dist::ProcessGroup* world);

}  // namespace train
}  // namespace tessera
