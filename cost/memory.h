// Model-state memory per rank for every strategy: the ZeRO paper's table (Rajbhandari et al.
// 2020, figure 1) for DDP and ZeRO-1/2/3, from dist/zero/memory_model.h (the formulas the train
// tool's measured figures are checked against), plus a pipeline stage and a tensor-parallel
// rank. psi parameters; p, g bytes per parameter and gradient; K optimizer bytes per parameter
// (cost/precision.h); N data-parallel ranks, K_s pipeline stages, T tensor-parallel ranks:
//
//                     parameters       gradients        optimizer state
//   DDP               p psi            g psi            K psi
//   ZeRO-1            p psi            g psi            (m + 4) psi / N    the f32 shard ZeRO
//   ZeRO-2            p psi            4 psi / N        (m + 4) psi / N    steps is a master copy
//   ZeRO-3            4 psi / N        4 psi / N        m psi / N          (memory_model.h)
//   pipeline stage    p psi_K          g psi_K          K psi_K            psi_K = (psi + psi_t)/K_s:
//                                                                          stages balanced by
//                                                                          parameters, each
//                                                                          use of a tied one
//                                                                          holding its copy
//   tensor parallel   p psi_T          g psi_T          K psi_T            psi_T = psi_r + psi_s/T
//
// psi_s: the parameters tensor parallelism splits (the MLP's Megatron block, a ResNet's
// class-parallel head), psi_r the rest, replicated. psi_t: the parameters used by two layers (a
// GPT's wte, by the embedding and the tied lm_head), which a pipeline of K_s > 1 stages keeps a
// second copy of on the last stage (pipeline/tied_parameters.h). Activations, buffers, workspace and the
// allocator's fragmentation are not model states and are not counted.
#pragma once

#include <string>
#include <vector>

#include "cost/precision.h"
#include "dist/zero/memory_model.h"

namespace tessera {
namespace cost {

struct MemoryRow {
  std::string strategy;  // "ddp", "zero1", "zero2", "zero3", "pipeline", "tensor_parallel"
  int divisor = 1;       // N for ZeRO, K_s for the pipeline, T for tensor parallelism
  dist::zero::ModelStateBytes bytes;
  std::string formula;  // the row of the table above with this setup's numbers
};

// One row per strategy: DDP and ZeRO-1/2/3 over `ranks`, a pipeline stage of `stages` (the
// model's tied parameters: `tied_parameters`), a tensor-parallel rank of `tensor_parallel` (its
// split parameters: `tensor_parallel_parameters`).
std::vector<MemoryRow> memory_per_rank(int64_t psi, int64_t tensor_parallel_parameters,
                                       int64_t tied_parameters, const TrainingSetup& setup,
                                       int ranks, int stages, int tensor_parallel);

// One pipeline stage of `stages` that holds `stage_parameters` (its layers' and its copies of
// tied parameters, counted on a real partition): DDP's bytes per parameter, "psi_k".
MemoryRow pipeline_stage_row(int64_t stage_parameters, const TrainingSetup& setup, int stages);

// The paper's own table (figure 1) for a model known only by its size: DDP and ZeRO-1/2/3 over
// `ranks` as Rajbhandari et al. write them, with p = g bytes per parameter and gradient and K
// optimizer bytes per parameter (mixed-precision Adam: 2, 2, 12), and a pipeline stage of `stages`
// (psi/K_s, stages balanced by parameters):
//
//   DDP (p + g + K) psi   ZeRO-1 p psi + g psi + K psi/N   ZeRO-2 p psi + (g + K) psi/N
//   ZeRO-3 (p + g + K) psi/N
//
// tessera's own ZeRO-2 and ZeRO-3 keep f32 shard gradients (memory_per_rank's rows), so for
// ZeRO-2 its bytes exceed these by 2 psi/N under mixed precision.
std::vector<MemoryRow> paper_memory_per_rank(int64_t psi, const TrainingSetup& setup, int ranks,
                                             int stages);

}  // namespace cost
}  // namespace tessera
