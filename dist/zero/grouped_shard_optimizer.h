// The optimizer of a rank's flat shards when the model's parameters come in groups with options
// of their own (GPT-2's AdamW decays the Linear weights and spares the biases, LayerNorms and
// embeddings): ZeRO-1/2's one shard of the flat vector (zero_optimizer.h), ZeRO-3's shard of each
// unit (fully_sharded.h).
//
// A shard is a contiguous run of the flat vector and mixes parameters of every group. It is cut
// where the group changes into pieces, each a Variable viewing its part of the shard (no copy),
// and an ordinary optimizer steps the pieces, those of group g under group g's options:
//
//   flat:      [ wte | ln_1.w ln_1.b | c_attn.w | c_attn.b | c_proj.w | ... ]  registration order
//   group:       nd     nd     nd        d          nd          d              d: decay, nd: none
//   shard r:               [ ln_1.b | c_attn.w | c_attn.b | c_pr ]
//   pieces:                [  nd  ] [   d    ] [   nd   ] [ d  ]
//   inner optimizer:  group 0 (decay) = pieces 2, 4; group 1 (no decay) = pieces 1, 3
//
// SGD, Adam and AdamW update every element on its own from its gradient, its state and its
// group's options, so stepping the pieces gives exactly what the unsharded optimizer over the
// same groups gives. This is PyTorch FSDP's way (use_orig_params: the optimizer sees each
// parameter's view into the local shard). DeepSpeed instead keeps one flat buffer per group,
// each partitioned on its own; cutting the one flat vector keeps what the rest of ZeRO rests
// on: one reduce-scatter and one all-gather per step, stage 2's buckets in registration order
// (so they fill as backward runs), one vector per unit in the sharded checkpoints, and the ZeRO
// paper's balanced partition. A rank whose shards hold no element of a group gets an empty
// piece for it, so every rank's inner optimizer has the same groups.
//
// To the outside it is the optimizer of the shards: gradient_variables() and zero_grad() are the
// shards' (a piece's gradient is a view of its shard's, set for the step only), and state_dict()
// holds, per shard s, "state.s.NAME" over the shard's elements, as an optimizer over the shards
// would (ZeroRedundancyOptimizer and zero::gather_optimizer_state turn it into the unsplit
// model's format). Offloaded (an Offload whose optimizer tier is host or disk), the pieces are cut
// further into pieces of at most Offload::piece_numel() elements whose state lives in the store
// and is streamed through memory at each step (dist/zero/offload/optimizer_swapper.h); the state
// dict has the same form, read back from the store. Its param_groups() are the given groups, over the original parameters, with
// their options (what LR schedules change and checkpoints save); parameters() is therefore the
// order in which an unsharded optimizer over the same groups numbers its state.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "autograd/variable.h"
#include "dist/zero/offload/offload.h"
#include "dist/zero/partition.h"
#include "optim/optimizer.h"

namespace tessera {
namespace dist {
namespace offload {
class OptimizerSwapper;
class ShardHome;
}  // namespace offload
}  // namespace dist
}  // namespace tessera

namespace tessera {
namespace dist {
namespace zero {

// One flat vector as a rank holds it: its shard and the parameters laid out in the vector.
struct FlatShard {
  Variable shard;                // this rank's elements; grad(): their (averaged) gradient
  std::vector<Variable> params;  // the flat vector's parameters, in its order
  FlatLayout layout;             // where each of them lies in the vector
  Range range;                   // the shard's elements of the vector (may reach into padding)
  // Where the shard's values and gradient live between uses when a ZeRO-3 wrapper offloads them
  // (dist/zero/offload/shard_home.h); null when they stay in `shard`. The step brings each
  // offloaded shard in, steps its pieces and writes it back, one shard at a time.
  std::shared_ptr<offload::ShardHome> home;
  int64_t numel() const { return range.size(); }
  bool offloaded() const { return home != nullptr; }
};

// Builds the inner optimizer over groups of pieces, each group with its options (null: the
// optimizer's defaults); it must keep the groups as given, e.g.
//   [](std::vector<optim::ParamGroup> g) { return std::make_unique<optim::AdamW>(g, defaults); }
// or grouped_factory<optim::AdamW>(defaults).
using GroupedOptimizerFactory =
    std::function<std::unique_ptr<optim::Optimizer>(std::vector<optim::ParamGroup> groups)>;

// Throws unless `inner` (what a factory made of `groups` groups) is an element-wise optimizer
// that kept them: stepping pieces of a shard is exact only then.
void check_inner_optimizer(const optim::Optimizer* inner, size_t groups);

template <typename Opt, typename Options>
GroupedOptimizerFactory grouped_factory(const Options& defaults) {
  return [defaults](std::vector<optim::ParamGroup> groups) {
    return std::make_unique<Opt>(std::move(groups), defaults);
  };
}

class GroupedShardOptimizer : public optim::Optimizer {
 public:
  // `groups` over the parameters of `shards` (each in exactly one group), their options
  // possibly null (the inner optimizer's defaults). Throws naming a parameter in two groups or
  // in none, and an inner optimizer that is not element-wise or changed the groups.
  // `offload`: where the state lives between steps (the device, by default).
  GroupedShardOptimizer(std::vector<FlatShard> shards, const std::vector<optim::ParamGroup>& groups,
                        const GroupedOptimizerFactory& make_optimizer,
                        const Offload& offload = Offload());
  ~GroupedShardOptimizer() override;

  // Steps every piece whose shard has a gradient, with its group's current options.
  void step() override;
  void zero_grad(bool set_to_none = true) override;
  // Per shard s: "state.s.step" and "state.s.NAME" over the shard's elements; the groups'
  // options as "param_groups.G.NAME".
  StateDict state_dict() const override;
  void load_state_dict(const StateDict& state) override;
  // The state held in memory (offloaded: the pieces in flight, not the shard).
  int64_t state_bytes() const override { return inner().state_bytes(); }
  // The pieces are fixed by the shards: further groups are an error.
  void add_param_group(optim::ParamGroup group) override;
  std::vector<Variable> gradient_variables() const override;

  const std::vector<FlatShard>& shards() const { return shards_; }
  // The optimizer over the pieces (its parameter k is the k-th piece in group order; offloaded,
  // over one window per group).
  const optim::Optimizer& inner() const;
  // The offloaded state's store and traffic; null when the state stays on the device.
  const offload::OptimizerSwapper* swapper() const { return swapper_.get(); }

 private:
  struct Piece {
    size_t shard;
    size_t group;
    Range range;  // within the shard
    Variable view;
  };
  // Points every piece at its part of its shard's current data and gradient (none if the shard
  // has none).
  void attach_pieces();
  void check_state_key(const std::string& key) const;
  optim::Optimizer& stepper();
  // Offloaded: the swapper over pieces of at most piece_numel elements, and its step and state.
  void build_swapper(std::vector<optim::ParamGroup> windows,
                     const GroupedOptimizerFactory& make_optimizer, const Offload& offload);
  void step_offloaded();
  StateDict offloaded_state_dict() const;
  void load_offloaded_state_dict(const StateDict& state);

  std::vector<FlatShard> shards_;
  std::vector<Piece> pieces_;  // in the inner optimizer's order: by group, then flat order
  std::unique_ptr<optim::Optimizer> inner_;  // null when offloaded
  // Offloaded: the swapped pieces (each within one piece of pieces_) and their swapper.
  struct SwappedPiece {
    size_t piece;
    Range range;  // within the piece's shard
  };
  std::vector<SwappedPiece> swapped_;
  std::unique_ptr<offload::OptimizerSwapper> swapper_;
};

}  // namespace zero
}  // namespace dist
}  // namespace tessera
