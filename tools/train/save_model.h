// --save-model=FILE: the trained model's weights, once training ends, as one safetensors file
// under the unsharded, unpipelined names (LibTorch's torch::save(model->state_dict())): what a
// user keeps, and what the composition tests compare across strategies. Gathered from the
// ranks by the strategy (ZeRO-3's shards, a pipeline's stages, tensor-parallel slices; the
// average model of local SGD and gossip, as evaluated), written by rank 0 atomically.
#pragma once

#include "tools/train/context.h"

namespace tessera {
namespace train {

// Collective; does nothing without --save-model.
void save_trained_model(const RunContext& run);

}  // namespace train
}  // namespace tessera
