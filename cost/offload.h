// ZeRO-Offload and ZeRO-Infinity per rank (dist/zero/offload/; docs/ZERO.md's offload section):
// which model states of a ZeRO row (memory.h) leave the device for the offload tier (host memory
// or disk: the same bytes either way), what stays resident, and what each training step reads
// from the tier and writes back. m: the optimizer's moment bytes per parameter; N ranks.
//
//   --offload=optimizer   ZeRO-1/2/3   the moments (m psi/N), and under mixed precision ZeRO-1/2's
//                                      f32 master (4 psi/N): O. The step reads O and writes it
//                                      back: O read, O written.
//   --offload=all         ZeRO-3       the f32 parameter shard P = 4 psi/N, the gradient shard
//                                      G = 4 psi/N and O = m psi/N; nothing resident between
//                                      uses. Per step P is read three times (the forward's
//                                      gather, the backward's, the step) and written once (the
//                                      step); G written once (the reduce-scatter) and read once
//                                      (the step); O read and written once:
//                                        read 3P + G + O = (16 + m) psi/N
//                                        written P + G + O = (8 + m) psi/N
//
// Measured (the train tool's "offload" report, the MLP under ZeRO-3 on 2 ranks): 3 parameter
// reads and 1 write per step, 1 gradient read and write, the optimizer state once each way, as
// above; the stores' shards are padded (each unit to a multiple of N elements, pieces to 4 KiB),
// so the measured bytes exceed psi/N's by that padding. Gradient accumulation (M micro-batches)
// adds M - 1 gradient reads and writes; clipping that clips, one gradient read and write.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cost/memory.h"

namespace tessera {
namespace cost {

struct OffloadRow {
  std::string strategy;  // "zero1", "zero2", "zero3"
  int64_t resident = 0;  // model-state bytes left on the device
  int64_t offloaded = 0;
  int64_t read_per_step = 0, written_per_step = 0;
  std::string formula;  // offloaded, read and written, in psi/N
};

// The rows of `rows` that `offload` ("optimizer" or "all") applies to, as above: ZeRO-1/2/3 for
// the optimizer, ZeRO-3 for all. An error naming the value for another.
std::vector<OffloadRow> offload_rows(const std::vector<MemoryRow>& rows, const std::string& offload,
                                     int64_t psi, const TrainingSetup& setup, int ranks);

}  // namespace cost
}  // namespace tessera
