// A real run's communication, for `explain comm --run=FILE`: the train tool's final JSON line
// (its stdout, or a file holding it) gives the model, strategy, compressor, world size and, per kind of
// collective, the calls and bytes rank 0 sent per training step ("comm_per_step", from the
// process groups' byte ledgers, dist/byte_ledger.h).
#pragma once

#include <string>
#include <vector>

namespace tessera {
namespace explain {

struct MeasuredCollective {
  std::string collective;  // "all_reduce", "reduce_scatter", "all_gather", "broadcast", "send"
  double calls = 0, bytes = 0;  // per training step
};

struct MeasuredComm {
  std::string path, model, strategy;
  std::string compression = "none";  // DDP's gradient compressor ("compression": {"name": ...})
  int ranks = 0;
  std::vector<MeasuredCollective> per_step;
};

// Reads the last line of `path` that is a JSON object with "comm_per_step"; throws naming the
// file and what is missing (a run on one process, or by a train tool without the field, has
// none).
MeasuredComm read_measured_comm(const std::string& path);

}  // namespace explain
}  // namespace tessera
