// The ZeRO paper's memory model (Rajbhandari et al. 2020, section 3 and figure 1), predicted
// and measured, so that a run prints the bytes its model states take beside the formula.
//
// "Model states" are the parameters, their gradients and the optimizer state. With psi
// parameters of p bytes (4 for f32, 2 for f16/bf16), an optimizer with m bytes of moments per
// parameter (SGD with momentum 4, Adam 8; f32 whatever the parameters' dtype), K its total
// bytes per parameter and N data-parallel ranks, tessera's implementations hold per rank:
//
//                 parameters     gradients     optimizer state
//   none (DDP)    p psi          p psi         K psi             K = m, + 4 for an f32 master
//                                                                    copy of half parameters
//   ZeRO-1        p psi          p psi         (m + 4) psi / N   the f32 shard ZeRO steps is a
//   ZeRO-2        p psi          4 psi / N     (m + 4) psi / N   master copy (f32 parameters
//                                                                too); its gradient is f32
//   ZeRO-3        4 psi / N      4 psi / N     m psi / N         the f32 flat shard is the
//                                                                parameter and its master
//
// With half parameters and Adam this is the paper's (2 + 2 + 12) psi, 2 psi + 2 psi + 12 psi / N,
// 2 psi + 14 psi / N (the paper's 2 + 14/N: it keeps f16 shard gradients, tessera f32 ones) and
// 16 psi / N (the paper's 2 + 2 + 12 split as 4 + 4 + 8: the f32 shard serves as both the
// parameter and its master, and is gathered into the f16/bf16 parameters for forward and
// backward). ZeRO-3's shards round psi / N up to a whole element per unit (padding).
//
// The measured figure adds up the storages the model states really hold (each storage once,
// released ones as zero) as the counting allocator allocated them, so a shard that is a view of
// a full buffer, or a gradient a stage should have freed, shows up.
#pragma once

#include <cstdint>
#include <vector>

#include "autograd/variable.h"
#include "optim/optimizer.h"

namespace tessera {
namespace dist {
namespace zero {

enum class Sharding { kNone, kStage1, kStage2, kStage3 };

struct ModelStateBytes {
  int64_t parameters = 0, gradients = 0, optimizer = 0;
  int64_t total() const { return parameters + gradients + optimizer; }
};

// psi parameters of param_bytes each, moment_bytes of optimizer moments per parameter, over
// `ranks` data-parallel ranks.
ModelStateBytes predicted_model_state(Sharding sharding, int64_t psi, int64_t param_bytes,
                                      int64_t moment_bytes, int ranks);

// What `parameters` (every Variable whose data and gradient the run keeps: the model's, and
// for ZeRO-3 the flat shards) and `optimizer` hold now: resident storage bytes of the
// parameters' data and of the gradients of the parameters and of the optimizer's
// gradient_variables(), and the optimizer's state_bytes().
ModelStateBytes measured_model_state(const std::vector<Variable>& parameters,
                                     const optim::Optimizer& optimizer);

// The bytes of gradients and parameters one rank sends per step over the ring collectives
// (dist/process_group_mpi.cc: a reduce-scatter sends (N-1)/N of its input, an all-gather
// (N-1)/N of its output):
//   DDP, ZeRO-1, ZeRO-2   2 (N-1)/N x elements x element_bytes   (an all-reduce, or a
//                                                                  reduce-scatter + all-gather)
//   ZeRO-3                3 (N-1)/N x elements x element_bytes   (two all-gathers and a
//                                                                  reduce-scatter)
// `elements`: the parameters (ZeRO-3: its units' padded sizes); `element_bytes`: what travels
// (DDP: the gradients' dtype; ZeRO-1/2: its f32 flat vector; ZeRO-3: the parameters' dtype).
// Exact when N divides every collective's length; otherwise within a few elements per
// collective (uneven chunks).
int64_t predicted_comm_bytes(Sharding sharding, int64_t elements, int64_t element_bytes, int ranks);

}  // namespace zero
}  // namespace dist
}  // namespace tessera
