// explain memory --measure: one real training step of each data-parallel strategy (DDP, ZeRO-1,
// ZeRO-2, ZeRO-3) and, on more than one rank, of a pipeline (a stage per rank) and of tensor
// parallelism over all of them (T = N: the MLP's block, other models' classifier) on the ranks
// the tool was started with, each rank's model states as the counting allocator holds them, for
// printing beside the ZeRO paper's prediction:
//
//   for strategy in ddp, zero1, zero2, zero3[, pipeline]:   (a fresh model each, seed 0)
//     build: DDP wraps the model | ZeroRedundancyOptimizer(stage 1|2) | FullyShardedDataParallel
//            | pipeline::Pipe (stages balanced by parameters, 4 micro-batches)
//            | tensor_parallel::parallelize_module / parallelize_classifier
//     step 1: forward, loss, backward, optimizer step  (creates the optimizer's state)
//     step 2: reset_peak; forward, loss, backward; measure (dist::zero::measured_model_state:
//             parameters, gradients, optimizer state); optimizer step; the step's peak
//     every rank's figures all-gathered
//
// Measured after backward and before the step, as the train tool's memory report does
// (tools/train/memory_report.h): the gradients exist and the optimizer's state has been made.
// f32 parameters, or under mixed precision bf16 ones with f32 masters (the optimizer's, or
// ZeRO-3's f32 flat shards), as train --param-dtype=bf16 keeps them.
#pragma once

#include <string>
#include <vector>

#include "cost/model_catalog.h"
#include "cost/precision.h"
#include "dist/process_group.h"
#include "dist/zero/memory_model.h"

namespace tessera {
namespace explain {

struct RankMemory {
  dist::zero::ModelStateBytes model_states;
  int64_t peak_bytes = 0;  // the allocator's peak during the measured step
  // A pipeline stage's parameters (elements): its layers' and its copies of tied parameters (a
  // GPT's wte, used by the first stage's embedding and the last stage's lm_head); 0 otherwise.
  int64_t stage_parameters = 0;
};

struct MeasuredStrategy {
  std::string strategy;           // ddp, zero1, zero2, zero3, pipeline, tensor_parallel (cost::MemoryRow's names)
  std::vector<RankMemory> ranks;  // every rank's, in rank order (on every rank)
};

// Collective over `world`: every rank must call it with the same arguments.
std::vector<MeasuredStrategy> measure_model_states(const std::string& model,
                                                   const cost::ModelInput& input, int64_t batch,
                                                   const cost::TrainingSetup& setup,
                                                   const std::shared_ptr<dist::ProcessGroup>& world);

}  // namespace explain
}  // namespace tessera
