// FSDP's wrap policy: which parts of a Sequential become units, and which parameters each unit
// owns, before anything is flattened or sharded (fully_sharded.h does that, one FlatParameter
// per unit).
//
//   units({0, 2}) or min_num_params(P)      wrap_layers(true)
//   [ unit0: child 0 ] child 1 [ unit1: 2 ]  [ conv ][ bn ] [ conv ][ bn ] ... one unit per
//   root: every child with parameters that    module with parameters of its own, at any depth
//         is not a unit (child 1 here)        (a child's own parameters: a unit at the child)
//
// Each parameter belongs to exactly one unit, named as the model names it, in the model's
// registration order: the order every rank flattens in, so the shards line up across ranks.
//
// A parameter that modules of two units use (weight tying: GPT-2's lm_head reads the token
// embedding's weight, declared with nn::Module::register_tied_parameter; or a module registered
// in two children) belongs, as in FSDP, to the unit enclosing all of its users: the root, whose
// span then reaches from its first user to its last, so it stays gathered from the first use's
// forward to the last use's backward:
//
//   children:  embed (wte, wpe)   h0   h1   ln_f   lm_head (ties wte)
//   units:     [unit0: wpe]     [unit1][unit2][unit3]
//   root:      [wte ............................................. lm_head]   (span 0..4)
//
// and its gradient, which autograd sums over both uses before the parameter's grad-ready hook,
// is reduce-scattered once, with the root's.
//
// Any other Module (a model of the user's own: its forward calls its layers as it likes) is
// wrapped as FSDP wraps one: an auto-wrap policy, asked of each module deepest first, makes
// units of modules anywhere in the tree, gathered and freed by their own forward hooks, nested
// where it chooses a module and modules inside it (the outer unit holds the parameters of its
// tree that no inner one took); the model's own module is the root unit, holding what is left,
// whole for the model's whole forward.
//
//   Net                       size_based_wrap_policy(1000)      module_wrap_policy<Block>()
//     embed   (8,000)         [embed]                           root: embed, head, scale
//     block0  (ln 64, fc 4k)  [block0 [fc]] (ln: block0's own)  [block0]
//     block1  (ln 64, fc 4k)  [block1 [fc]]                     [block1]
//     head    (640)           root: head, scale                 
//     scale   (1, Net's own)
//
// A parameter that modules of two units use (tied, or a module registered in two places) goes
// to the root. A Sequential given a policy is wrapped this way too.
#pragma once


#include <string>
#include <utility>
#include <vector>

#include "autograd/variable.h"
#include "dist/zero/fully_sharded_options.h"
#include "nn/sequential.h"

namespace tessera {
namespace dist {
namespace zero {

// Where a unit sits in the model: (child, module in the child's depth-first walk; 0 for the
// child itself). Compared lexicographically: the order the units first run in.
using UnitPosition = std::pair<size_t, size_t>;

// One unit as the wrap policy chose it.
struct UnitSpec {
  std::vector<std::pair<std::string, Variable>> params;  // its parameters, under dotted names
  // The top-level children the unit spans (the root's may be far apart: its own children and
  // those that use its shared parameters); empty for a unit nested inside a child, whose module
  // is `module`.
  std::vector<size_t> children;
  nn::Module* module = nullptr;
  bool is_root = false;
  UnitPosition first, last;  // its first and last module, for the orders before any forward
};

// The units of `model` under `options` (units(), min_num_params or wrap_layers), in child
// order, the root (if any child's parameters are left over, or any parameter is shared) last.
// Throws naming the child or parameter for a unit list out of range or repeated, a unit without
// parameters (or with shared ones only), a tie to a parameter the model does not hold, or
// parameters registered on the Sequential itself.
std::vector<UnitSpec> wrap_units(nn::Sequential& model, const FullyShardedOptions& options);

// The units of any module under `options`: its auto_wrap_policy, else wrap_layers (every module
// with parameters of its own), else size_based_wrap_policy(min_num_params). Each unit's
// `module` is set (its hooks gather it), the root's is not; in the model's depth-first order,
// the root last. Throws for units(), which lists a Sequential's children.
std::vector<UnitSpec> wrap_module_units(nn::Module& model, const FullyShardedOptions& options);


}  // namespace zero
}  // namespace dist
}  // namespace tessera
