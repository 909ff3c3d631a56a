// FullyShardedOptions: how FullyShardedDataParallel (fully_sharded.h) groups a model into units
// and runs them. The wrap policy (which children or layers become units: an explicit list, a
// size threshold, or every layer) is read by wrap_policy.h; the rest by the wrapper itself.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "dist/zero/mixed_precision.h"
#include "dist/zero/offload/offload.h"
#include "nn/module.h"

namespace tessera {
namespace dist {

// An auto-wrap policy (FSDP's auto_wrap_policy): asked of each module below the model's own,
// deepest first, with the number of parameters in its tree that no unit below it has taken;
// true makes the module a unit. dist/zero/wrap_policy.h makes the usual ones:
// size_based_wrap_policy(n), module_wrap_policy<Block>().
using WrapPolicy = std::function<bool(const nn::Module& module, int64_t unwrapped_params)>;

class FullyShardedOptions {
 public:
  // A Sequential only: the children (by position) that become units, one unit each. When not
  // given, the size-based auto-wrap policy decides.
  FullyShardedOptions& units(std::vector<size_t> children) {
    units_ = std::move(children);
    return *this;
  }
  // Size-based auto-wrap policy (FSDP's size_based_auto_wrap_policy): a Sequential's every child
  // with at least this many parameters becomes a unit, the others' parameters joining the root
  // unit; any other Module's every module, deepest first, with at least this many parameters
  // that no unit below it took (size_based_wrap_policy). The default, 1: every layer.
  FullyShardedOptions& min_num_params(int64_t n) { min_num_params_ = n; return *this; }
  // Layer-wise wrapping (FSDP's ModuleWrapPolicy over the layer types): every module that holds
  // parameters of its own becomes a unit, at any depth, so a ResNet block's convolutions and
  // batch norms are gathered one at a time instead of the whole block. A unit nested inside a
  // child is gathered and freed by forward hooks around its own forward (nn::Module's
  // operator()): the modules that contain it must call it as (*child)(x), as Sequential and
  // the ResNet blocks do. Replaces units() and min_num_params for the choice of units.
  FullyShardedOptions& wrap_layers(bool w) { wrap_layers_ = w; return *this; }
  // Any policy (wrap_policy.h), for any model: the modules it chooses become units, nested in
  // one another where it chooses a module and modules inside it; the model's own module holds
  // what is left (the root unit, whole for the model's whole forward). Replaces units(),
  // min_num_params and wrap_layers for the choice of units.
  FullyShardedOptions& auto_wrap_policy(WrapPolicy policy) {
    auto_wrap_policy_ = std::move(policy);
    return *this;
  }
  // Free a unit's gathered parameters after its forward (true, ZeRO-3) or keep them until the
  // end of backward (false: one all-gather per step fewer, memory of ZeRO-2 for parameters).
  FullyShardedOptions& reshard_after_forward(bool r) { reshard_after_forward_ = r; return *this; }
  // Prefetching with a limit on gathers in flight (FSDP's forward/backward prefetch with
  // limit_all_gathers): when a unit starts its forward (or its backward), the all-gathers of up
  // to this many units that run next in that order are launched, so at most 1 + limit units
  // are gathered at once. 0 (the default): no prefetch, one unit gathered at a time.
  FullyShardedOptions& prefetch_limit(int n) { prefetch_limit_ = n; return *this; }
  // Gather units in a low precision and average gradients in reduce_dtype, the shards staying
  // f32 masters (FSDP's mixed_precision; dist/zero/mixed_precision.h). Under autocast this is
  // what keeps ZeRO-3's memory saving: without it every unit's autocast cast stays cached.
  // The forward's floating-point input is cast to param_dtype (FSDP's cast_forward_inputs).
  FullyShardedOptions& mixed_precision(const MixedPrecision& m) { mixed_precision_ = m; return *this; }
  // Where each unit's master shard and gradient shard live between uses (ZeRO-Infinity's
  // offload_param; dist/zero/offload/shard_home.h): Offload().params(kDisk).gradients(kDisk)
  // .optimizer(kDisk).dir(path), the same Offload then given to zero::GroupedShardOptimizer for
  // the optimizer state. Only the params and gradients tiers are read here.
  FullyShardedOptions& offload(const Offload& o) { offload_ = o; return *this; }

  const std::vector<size_t>& units() const { return units_; }
  int64_t min_num_params() const { return min_num_params_; }
  bool wrap_layers() const { return wrap_layers_; }
  const WrapPolicy& auto_wrap_policy() const { return auto_wrap_policy_; }
  bool reshard_after_forward() const { return reshard_after_forward_; }
  int prefetch_limit() const { return prefetch_limit_; }
  const MixedPrecision& mixed_precision() const { return mixed_precision_; }
  const Offload& offload() const { return offload_; }

 private:
  std::vector<size_t> units_;
  int64_t min_num_params_ = 1;
  bool wrap_layers_ = false;
  WrapPolicy auto_wrap_policy_;
  bool reshard_after_forward_ = true;
  int prefetch_limit_ = 0;
  MixedPrecision mixed_precision_;
  Offload offload_;
};

}  // namespace dist
}  // namespace tessera
