// --offload, --offload-tier, --offload-dir: the train tool's side of dist/zero/offload/ (ZeRO's
// optimizer state, and with --offload=all ZeRO-3's parameter and gradient shards, kept in host
// memory or on disk between uses): the dist::Offload a
// configuration asks for, and the run's report of what moved (the flags are in
// flag_table_data_parallel.cc, their rows in the support table).
#pragma once

#include <string>

#include "dist/zero/offload/offload.h"

namespace tessera {
namespace dist {
class FullyShardedDataParallel;
}  // namespace dist
}  // namespace tessera
#include "optim/optimizer.h"
#include "tools/json/json_writer.h"
#include "tools/train/flags.h"

namespace tessera {
namespace train {

// The offload of the run's ZeRO optimizer (nothing offloaded for --offload=none).
dist::Offload offload_of(const Config& c);

// Adds "offload" to the run's summary when `optimizer` (a ZeroRedundancyOptimizer or a
// zero::GroupedShardOptimizer) keeps its state offloaded: the tier, the bytes offloaded, the
// bytes read and written by the last step (this rank's), and ZeRO-1/2's offloaded masters;
// with --offload=all, ZeRO-3's parameter and gradient shards in `fsdp`'s stores.
void report_offload(json::Object& summary, const optim::Optimizer& optimizer,
                    const dist::FullyShardedDataParallel* fsdp = nullptr);

}  // namespace train
}  // namespace tessera
