// Auto-wrap policies for FullyShardedDataParallel (FSDP's torch.distributed.fsdp.wrap): which
// modules of a model become units, each gathered whole only around its own forward and
// backward. Give one to FullyShardedOptions::auto_wrap_policy; wrap_policy.h applies it.
//
//   FullyShardedOptions().auto_wrap_policy(module_wrap_policy<Block>())   // every Block
//   FullyShardedOptions().auto_wrap_policy(size_based_wrap_policy(1000000))  // by size, nested
#pragma once

#include <cstdint>

#include "dist/zero/fully_sharded_options.h"

namespace tessera {
namespace dist {

// FSDP's size_based_auto_wrap_policy: a module with at least `min_num_params` parameters that no
// unit below it took.
WrapPolicy size_based_wrap_policy(int64_t min_num_params);
// FSDP's ModuleWrapPolicy: every module of one of these types (a transformer's block):
//   FullyShardedOptions().auto_wrap_policy(module_wrap_policy<Block>())
template <typename... M>
WrapPolicy module_wrap_policy() {
  static_assert(sizeof...(M) > 0, "module_wrap_policy needs a module type");
  return [](const nn::Module& m, int64_t) {
    return (... || (dynamic_cast<const M*>(&m) != nullptr));
  };
}
// Every module holding parameters of its own (FullyShardedOptions::wrap_layers).
WrapPolicy layer_wrap_policy();

}  // namespace dist
}  // namespace tessera
