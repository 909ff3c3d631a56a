// Bytes one rank sends per training step, per strategy and per collective, as the process
// group's ByteLedger (dist/byte_ledger.h) counts them: a ring reduce-scatter or all-gather of n
// bytes sends (N-1)/N n, an all-reduce 2 (N-1)/N n, a send its tensor's bytes. psi parameters,
// N data-parallel ranks, g gradient bytes per element, p parameter bytes:
//
//   DDP              all_reduce       one per bucket            2 (N-1)/N g psi
//   ZeRO-1, ZeRO-2   reduce_scatter   of the f32 flat gradient  (N-1)/N 4 psi
//                    all_gather       of the f32 flat params    (N-1)/N 4 psi
//   ZeRO-3           all_gather       two per unit (forward,    2 (N-1)/N p P
//                                     and again for backward)
//                    reduce_scatter   one per unit, f32         (N-1)/N 4 P
//                    (P: the units' sizes padded to a multiple of N; one unit per layer with
//                    parameters; f32: 3 (N-1)/N 4 psi, the paper's 1.5x DDP)
//   pipeline         send             per micro-batch: the stage's output activation forward
//                                     and its input's gradient backward, each a tensor led by
//                                     a 96-byte header (pipeline/p2p.h); the busiest stage
//   tensor parallel  all_reduce       Megatron's f and g: per example the activations listed
//                                     in ModelProfile::tensor_parallel_all_reduces, 2 (T-1)/T
//
// DDP and ZeRO-1/2 totals are dist/zero/memory_model.h's predicted_comm_bytes(). The pipeline
// and tensor-parallel rows are for one replica (K stages on K ranks, T ranks); their
// data-parallel gradient reduction is a DDP row over psi/K or psi_T parameters. Activations
// travel in the parameters' precision (f32, or 16 bits under mixed precision).
#pragma once

#include <string>
#include <vector>

#include "cost/model_profile.h"
#include "cost/precision.h"

namespace tessera {
namespace cost {

struct Transfer {
  std::string strategy;    // ddp, zero1, zero2, zero3, pipeline, tensor_parallel
  std::string collective;  // the ledger's names: all_reduce, reduce_scatter, all_gather, send
  int64_t calls = 0;
  double bytes = 0;  // sent by this rank per step
  std::string formula;
};

struct TrafficOptions {
  int ranks = 2;            // N, data-parallel
  int stages = 2;           // K, pipeline
  int microbatches = 4;     // M
  int tensor_parallel = 2;  // T
  double first_bucket_mb = 1, bucket_cap_mb = 25;
};

std::vector<Transfer> traffic_per_step(const ModelProfile& model, const TrainingSetup& setup,
                                       const TrafficOptions& options);

// The layers (by index) where a pipeline of `stages` stages cuts `model`: stage s ends after
// layer cuts[s]. Balanced by the layers' compute times when the profile has them, else by
// their parameters (pipeline/balance.h's balance_by_cost).
std::vector<size_t> pipeline_cuts(const ModelProfile& model, int stages);

}  // namespace cost
}  // namespace tessera
