// parallelize_module: turns the named Linear layers of a model built as usual (same seed, so
// the same full weights on every rank) into their tensor-parallel versions, in place, as
// PyTorch's torch.distributed.tensor.parallel.parallelize_module does with a plan:
//
//   auto model = models::MLP(784, 256, 10);              // fc1, relu, fc2
//   tensor_parallel::parallelize_module(*model, tp_group,
//       {{"fc1", Style::kColumnwise}, {"fc2", Style::kRowwise}});
//
// Styles:
//   kColumnwise  ColumnParallelLinear, output left split (the input of a kRowwise layer);
//   kRowwise     RowParallelLinear taking an input already split (input_is_parallel);
//   kColumnwiseGathered   ColumnParallelLinear whose output is gathered (full on every rank);
//   kClassParallelHead    ColumnParallelLinear as the classifier: logits stay split by class,
//                         for ClassParallelCrossEntropy (TorchShard's recipe for large heads).
//   kColumnwiseHeads      ColumnParallelLinear::heads: a CausalSelfAttention's c_attn, its
//                         q | k | v each split by heads (n_head % T == 0), so the attention runs
//                         this rank's n_head / T heads; c_proj after it is kRowwise.
//
// gpt_plan.h gives the whole plan of a GPT's blocks (Megatron-LM's).
//
// Names are dotted paths from the model ("head.fc"); each must name a Linear that is the child
// of a module that runs its children through named_children() (Sequential does), since the
// layer is swapped with Module::replace_module. The layers' places, names and parameter names
// stay the same, so state_dict() keys are the non-parallel model's.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dist/process_group.h"
#include "nn/module.h"

namespace tessera {
namespace dist {
namespace tensor_parallel {

enum class Style {
  kColumnwise,
  kRowwise,
  kColumnwiseGathered,
  kClassParallelHead,
  kColumnwiseHeads,
};

using ParallelizePlan = std::vector<std::pair<std::string, Style>>;

// Returns the new modules, in plan order.
std::vector<std::shared_ptr<nn::Module>> parallelize_module(nn::Module& model,
                                                            const std::shared_ptr<ProcessGroup>& group,
                                                            const ParallelizePlan& plan);

// The module at a dotted path of `model` ("embed.wte"), or an error naming the path.
std::shared_ptr<nn::Module> module_at(nn::Module& model, const std::string& path);
// Puts `module` in the place of the module at `path` (Module::replace_module on its parent,
// which must run its children through named_children()); returns the old one.
std::shared_ptr<nn::Module> replace_module_at(nn::Module& model, const std::string& path,
                                              std::shared_ptr<nn::Module> module);

// The dotted name of the model's last Linear in registration order (its classifier), or an
// error when it has none.
std::string last_linear_name(nn::Module& model);

}  // namespace tensor_parallel
}  // namespace dist
}  // namespace tessera
