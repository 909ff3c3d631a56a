// --offload, --offload-tier, --offload-dir: the train tool's side of dist/zero/offload/ (ZeRO's
// optimizer state kept in host memory or on disk between steps): the dist::Offload a
// configuration asks for, and the run's report of what moved (the flags are in
// flag_table_data_parallel.cc, their rows in the support table).
#pragma once

#include <string>

#include "dist/zero/offload/offload.h"
#include "optim/optimizer.h"
#include "tools/json/json_writer.h"
#include "tools/train/flags.h"

namespace tessera {
namespace train {

// The offload of the run's ZeRO optimizer (nothing offloaded for --offload=none).
dist::Offload offload_of(const Config& c);

// Adds "offload" to the run's summary when `optimizer` (a ZeroRedundancyOptimizer or a
// zero::GroupedShardOptimizer) keeps its state offloaded: the tier, the bytes offloaded, the
// bytes read and written by the last step (this rank's), and ZeRO-1/2's offloaded masters.
void report_offload(json::Object& summary, const optim::Optimizer& optimizer);

}  // namespace train
}  // namespace tessera
