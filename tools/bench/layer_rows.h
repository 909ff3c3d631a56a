// layer_bench's rows: each distinct layer shape of a ResNet step as a closure that runs it once,
// on random inputs made up front so a run times the layer alone. Convolutions give three rows
// (forward, backward-data = input gradient, backward-weight); batch norm, batch norm fused with
// the ReLU (and the residual add) and max pooling two (fwd, bwd); the SGD update of all the
// model's parameters one.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tensor/tensor.h"
#include "tools/bench/resnet_layer_shapes.h"

namespace tessera {
namespace bench {

// A name, how often one step runs it, its GFLOP (0: memory-bound), the least traffic a pass of
// its own must move (memory-bound rows; see layer_rows.cc), and one run of it.
struct Row {
  std::string name;
  int count;
  double gflop;
  double gbytes;
  std::function<void()> fn;
};

// Every row of `model` ("resnet18" or "resnet50", whose shapes `layers` lists) at `batch`, the
// activations in `format` (as Module::to(format) would run them).
std::vector<Row> layer_rows(const Layers& layers, const std::string& model, int64_t batch,
                            MemoryFormat format = MemoryFormat::kContiguous);

// Drops the rows whose name does not contain `only` (all stay when it is empty).
void keep_rows_named(const std::string& only, std::vector<Row>* rows);

}  // namespace bench
}  // namespace tessera
