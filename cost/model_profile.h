// ModelProfile: what the cost models need to know of a model, without the model: its layers in
// order (a Sequential's children), each layer's parameter sizes in registration order (DDP's
// buckets and ZeRO's shards are cut from them), the size of its output per example (what a
// pipeline stage cut after it sends), and how long its forward and backward take on one rank's
// batch. cost/model_catalog.h fills one from a real model; tests write small ones by hand.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tessera {
namespace cost {

struct LayerProfile {
  std::string name;
  std::vector<int64_t> parameter_numels;  // registration order
  int64_t output_elements = 0;            // per example
  double forward_seconds = 0, backward_seconds = 0;  // for ModelProfile::batch examples
  // The parameters' shapes, where known (a real model's; cost/model_catalog.h): PowerSGD's price depends
  // on them. Empty: each parameter taken as a vector of parameter_numels[i].
  std::vector<std::vector<int64_t>> parameter_shapes;
  int64_t parameters() const;
};

struct ModelProfile {
  std::string name;
  int64_t batch = 1;           // examples per rank per step, what the times are for
  int64_t input_elements = 0;  // per example
  std::vector<LayerProfile> layers;
  // Tensor parallelism (dist/tensor_parallel): the parameters split T ways (the rest are
  // replicated), and the activations all-reduced per example per step, by what they are.
  int64_t tensor_parallel_parameters = 0;
  // Parameters used by two layers (a GPT's wte: the embedding's and the tied lm_head's), which a
  // pipeline cutting between them keeps a copy of on each side (pipeline/tied_parameters.h).
  int64_t tied_parameters = 0;
  std::vector<std::pair<std::string, int64_t>> tensor_parallel_all_reduces;
  // Where the times came from (measured here, scaled to a given total, given per layer).
  std::string times_source = "none";
  // Per step, on one rank, outside the layers and not overlapped with communication: the loss,
  // the autograd engine's own work and the optimizer step (measured: a whole training step less
  // the layers' times; 0 when not measured).
  double step_overhead_seconds = 0;

  int64_t parameters() const;  // psi
  double forward_seconds() const;
  double backward_seconds() const;
  double compute_seconds() const { return forward_seconds() + backward_seconds(); }
  // Every parameter's element count, in registration order, and the layer each belongs to.
  std::vector<int64_t> parameter_numels() const;
  std::vector<size_t> parameter_layers() const;
  // Every parameter's shape, in registration order (parameter_shapes, or {numel} where unknown).
  std::vector<std::vector<int64_t>> parameter_shapes() const;
};

}  // namespace cost
}  // namespace tessera
