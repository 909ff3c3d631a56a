// tessera: the whole user-facing API in one include, as LibTorch's torch/torch.h.
//
//   #include "tessera.h"            BUILD: deps = ["//:tessera"]  (or "@tessera//:tessera")
//   using namespace tessera;
//
// Namespaces: tessera (Tensor, ops, Variable, differentiable functions, autograd), tessera::nn
// (Module and layers), tessera::optim, tessera::data, tessera::dist (process groups, DDP, ZeRO,
// tensor parallelism, checkpoints), tessera::pipeline, tessera::models.
#pragma once

// Tensors and their ops (no autograd), devices, dtypes, memory statistics, random streams.
#include "tensor/accelerator.h"
#include "tensor/allocator.h"
#include "tensor/half.h"
#include "tensor/ops.h"
#include "tensor/parallel.h"
#include "tensor/random.h"
#include "tensor/safetensors.h"
#include "tensor/tensor.h"

// Autograd: Variable, backward and its hooks, the differentiable ops, custom ops, checkpointing,
// autocast.
#include "autograd/autocast.h"
#include "autograd/checkpoint.h"
#include "autograd/custom_op.h"
#include "autograd/engine.h"
#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/recompute.h"
#include "autograd/gradcheck.h"
#include "autograd/variable.h"

// Layers, losses, metrics, weights on disk.
#include "nn/nn.h"

// Optimizers, schedules, clipping, loss scaling.
#include "optim/adam.h"
#include "optim/clip_grad.h"
#include "optim/grad_scaler.h"
#include "optim/lr_scheduler.h"
#include "optim/sgd.h"

// Datasets, transforms, samplers, the DataLoader.
#include "data/data_loader.h"
#include "data/dataset.h"
#include "data/distributed_sampler.h"
#include "data/mnist.h"
#include "data/mnist_dataset.h"
#include "data/text_data.h"
#include "data/token_file.h"
#include "data/token_windows.h"
#include "data/tokenizer.h"
#include "data/transforms.h"

// Distributed training: MPI start-up, process groups, DDP, ZeRO, checkpoints, traces.
#include "dist/amp.h"
#include "dist/async/async_worker.h"
#include "dist/async/parameter_server.h"
#include "dist/checkpoint.h"
#include "dist/training_state/training_state.h"
#include "dist/compression/compression_hook.h"
#include "dist/compression/error_feedback.h"
#include "dist/compression/make_hook.h"
#include "dist/compression/powersgd.h"
#include "dist/context_parallel/gather_sequence.h"
#include "dist/context_parallel/parallelize_context.h"
#include "dist/context_parallel/ulysses_attention.h"
#include "dist/ddp/ddp.h"
#include "dist/collective_timeout.h"
#include "dist/environment.h"
#include "dist/gossip/gossip.h"
#include "dist/gossip/mixing_matrix.h"
#include "dist/grad_norm.h"
#include "dist/hierarchical_all_reduce.h"
#include "dist/local_sgd/consensus_distance.h"
#include "dist/local_sgd/diloco.h"
#include "dist/local_sgd/periodic_model_averager.h"
#include "dist/local_sgd/post_local_sgd_optimizer.h"
#include "dist/module_sync.h"
#include "dist/process_group.h"
#include "dist/reduce_scalar.h"
#include "dist/state_dict_gather.h"
#include "dist/straggler.h"
#include "dist/tensor_parallel/class_parallel_cross_entropy.h"
#include "dist/tensor_parallel/class_parallel_head.h"
#include "dist/tensor_parallel/column_parallel_linear.h"
#include "dist/tensor_parallel/gpt_plan.h"
#include "dist/tensor_parallel/norm_counted.h"
#include "dist/tensor_parallel/parallel_region.h"
#include "dist/tensor_parallel/parallelize.h"
#include "dist/tensor_parallel/row_parallel_linear.h"
#include "dist/tensor_parallel/sequence_parallel.h"
#include "dist/tensor_parallel/sequence_parallel_region.h"
#include "dist/topology.h"
#include "dist/trace_file.h"
#include "dist/trace_recorder.h"
#include "dist/zero/auto_wrap_policy.h"
#include "dist/zero/fully_sharded.h"
#include "dist/zero/sharded_checkpoint.h"
#include "dist/zero/zero_optimizer.h"

// Pipeline parallelism: Pipe (GPipe, 1F1B, interleaved 1F1B), schedules and their validator.
#include "pipeline/balance.h"
#include "pipeline/optimizer_state.h"
#include "pipeline/pipe.h"
#include "pipeline/schedule_grid.h"

// Reference models.
#include "models/gpt.h"
#include "models/resnet.h"
#include "models/simple.h"
