// layer_bench's command line: the model, the batch, the thread counts, the repeats, a filter on
// the rows' names, and the clock.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace tessera {
namespace bench {

struct LayerBenchFlags {
  std::string model = "resnet50";  // resnet18 or resnet50
  int64_t batch = 8;
  int reps = 5;                    // timed runs of each row, after one warm-up
  std::vector<int> threads = {1, 2};
  std::string only;                // run only the rows whose name contains this
  // --channels-last / --channels-blocked: the activations' memory format
  MemoryFormat format = MemoryFormat::kContiguous;
};

// Fills `flags` from argv (--clock=cpu sets bench::cpu_clock). False, with the reason on stderr,
// for a flag it does not know or a model it does not list.
bool parse_layer_bench_flags(int argc, char** argv, LayerBenchFlags* flags);

}  // namespace bench
}  // namespace tessera
