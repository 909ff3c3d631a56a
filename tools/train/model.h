// The model a run trains (--model, from models/) placed on its device and in --param-dtype,
// and the learning-rate schedule (--schedule, --warmup-epochs) over the strategy's optimizer.
#pragma once

#include <cstdint>
#include <memory>

#include "nn/sequential.h"
#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"
#include "tensor/device.h"
#include "tensor/dtype.h"
#include "tools/train/flags.h"

namespace tessera {
namespace train {

// On the CPU in f32, as every model is built. vocab_size: a GPT's tokenizer's (padded to a
// multiple of 64 in the model).
std::shared_ptr<nn::Sequential> make_model(const Config& config, int64_t channels,
                                           int64_t vocab_size);

// Moves the model to `device`, then its parameters to --param-dtype (BatchNorm stays f32).
// Returns the dtype its inputs take. Done before the strategy: DDP broadcasts and ZeRO shards
// the device's tensors.
DType place_model(const Config& config, nn::Module& model, Device device);

// Null for --schedule=constant without warm-up.
std::shared_ptr<optim::LRScheduler> make_schedule(const Config& config, optim::Optimizer& opt);

}  // namespace train
}  // namespace tessera
