// explain memory's activations, measured on the ranks of a layout (cost/sequence_layout.h): the
// GPT split as the train tool splits it, T-way tensor parallelism (with sequence parallelism)
// over ranks t = rank % T, C-way context parallelism over ranks c = rank / T, and a training
// forward one layer of its Sequential at a time, as activation_measure.h does on one process:
//
//   for each layer i:  before = memory_stats().current_bytes
//                      x = layer_i(x)                   (this rank's tokens, its slices)
//                      bytes_i = current_bytes - before
//
// Tensor parallelism: dist::tensor_parallel::parallelize_gpt, every rank of a group reading the
// same windows; the loss row is the vocabulary-parallel cross-entropy's. Context parallelism:
// dist::context_parallel::parallelize_context, each rank reading its chunks of the windows
// (head-tail). Collective over `world` (its size T x C): every rank gets every rank's figures.
#pragma once

#include <memory>
#include <vector>

#include "cost/model_catalog.h"
#include "cost/precision.h"
#include "cost/sequence_layout.h"
#include "dist/process_group.h"
#include "tools/explain/activation_measure.h"

namespace tessera {
namespace explain {

// Per rank (rank order), its layers' bytes.
std::vector<std::vector<MeasuredActivation>> measure_activations_on_ranks(
    const std::string& model, const cost::ModelInput& input, int64_t batch,
    cost::Precision precision, const cost::SequenceLayout& layout,
    const std::shared_ptr<dist::ProcessGroup>& world);

}  // namespace explain
}  // namespace tessera
