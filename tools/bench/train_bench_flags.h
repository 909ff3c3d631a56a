// train_bench's command line: which models, how many steps and threads, which autocast dtypes,
// the parameters' dtype between steps, the activations' memory format, and the clock.
#pragma once

#include <string>
#include <vector>

#include "tensor/dtype.h"
#include "tensor/tensor.h"

namespace tessera {
namespace bench {

struct TrainBenchFlags {
  std::string models;                // --models=a,b: run the cases whose name is in it
  int resnet_steps = 20;             // --steps: timed steps of the ResNets and GPTs
  // --batch, --seq-len: the GPTs' batch (sequences) and sequence length (0: the case's own).
  int batch = 0, seq_len = 0;
  std::vector<int> thread_counts = {1, 2};
  std::vector<std::string> amps = {"off"};  // autocast dtypes: off, bf16, fp16
  // f32, or bf16/f16 for parameters kept in that dtype between steps (model->to; the optimizer
  // keeps f32 masters, BatchNorm stays f32), so autocast has no per-forward casts to make.
  DType param_dtype = kF32;
  // --channels-last: model->to(MemoryFormat::kChannelsLast), so convolutions that can (f32 on
  // the CPU, and bf16 on oneDNN) read and write NHWC, and batch norm and pooling keep it.
  // --channels-blocked: model->to(MemoryFormat::kChannelsBlocked), the same with nChw16c (f32
  // on the CPU).
  MemoryFormat memory_format = MemoryFormat::kContiguous;
};

// Fills `flags` from argv (--clock=cpu sets bench::cpu_clock). False, with the reason on stderr,
// for a flag or value it does not know.
bool parse_train_bench_flags(int argc, char** argv, TrainBenchFlags* flags);

}  // namespace bench
}  // namespace tessera
