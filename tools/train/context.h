// What every step of a training run works on once run() (main.cc) has built it: the flags, the
// ranks, the device, the model and the strategy that parallelizes it. Plain references: run()
// owns them all and outlives every step.
#pragma once

#include "dist/process_group.h"
#include "nn/sequential.h"
#include "tensor/device.h"
#include "tensor/dtype.h"
#include "tools/train/flags.h"
#include "tools/train/precision.h"
#include "tools/train/strategy.h"
#include "tools/train/tensor_parallel.h"

namespace tessera {
namespace train {

struct RunContext {
  const Config& config;
  dist::ProcessGroup* world;  // null for one process
  int ranks;                  // the world's size (1 for one process)
  bool lead;                  // rank 0: prints, writes the metrics and checkpoints
  Device device;
  DType input_dtype;          // the parameters' dtype, which the inputs take (place_model)
  nn::Sequential& model;
  Strategy& strategy;
  MixedPrecision& precision;
  int64_t parameters;  // the model's, before any strategy split or sharded it (psi)
  const Head& head;                              // the loss and the predicted classes
  const TensorParallelFigures* tensor_parallel;  // null without --tensor-parallel
};

// A batch's inputs on the run's device, in the parameters' dtype; token ids (a GPT's, i64) stay
// integers for the embedding.
inline Tensor model_inputs(const RunContext& run, const Tensor& inputs) {
  const Tensor on_device = inputs.to(run.device);
  return is_floating(inputs.dtype()) ? on_device.to(run.input_dtype) : on_device;
}

}  // namespace train
}  // namespace tessera
