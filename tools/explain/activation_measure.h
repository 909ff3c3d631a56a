// explain memory's activations, measured: a training forward of a model, one layer of its
// Sequential at a time, the counting allocator read after each. A layer's bytes are what it
// leaves allocated: the tensors its autograd nodes saved for backward and its output (which the
// next layer saves or reads); what it allocated and freed inside does not count. The loss's row
// is the cross-entropy's (its saved probabilities).
//
//   for each layer i:  before = memory_stats().current_bytes
//                      x = layer_i(x)                 (grad mode on, autograd recording)
//                      bytes_i = current_bytes - before
//
// f32: the model as built. Mixed: its parameters cast to bf16 first (train --param-dtype=bf16),
// so every activation is bf16 but what an op keeps in f32 (LayerNorm's statistics, the
// attention's logsumexp, the loss's). The parameters (and their bf16 copies) are allocated
// before the first reading, so they are not counted.
#pragma once

#include <string>
#include <vector>

#include "cost/model_catalog.h"
#include "cost/precision.h"
#include "nn/sequential.h"

namespace tessera {
namespace explain {

struct MeasuredActivation {
  std::string layer;  // the Sequential's child name, or "loss"
  int64_t bytes = 0;
};

// On this process (no ranks): `model` is built by cost::build_model(name, input).
std::vector<MeasuredActivation> measure_activations(nn::Sequential& model,
                                                    const cost::ModelInput& input, int64_t batch,
                                                    cost::Precision precision);

}  // namespace explain
}  // namespace tessera
