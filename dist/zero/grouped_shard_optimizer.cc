#include "dist/zero/grouped_shard_optimizer.h"

#include <algorithm>
#include <map>
#include <string>

#include "autograd/grad_mode.h"
#include "dist/zero/offload/optimizer_swapper.h"
#include "dist/zero/offload/shard_home.h"
#include "optim/elementwise_optimizer.h"
#include "optim/state_keys.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {
namespace zero {

namespace {

const char* const kWho = "GroupedShardOptimizer";

// Each parameter's group, checking that none is in two.
std::map<const VariableImpl*, size_t> group_of_parameters(const std::vector<optim::ParamGroup>& groups) {
  std::map<const VariableImpl*, size_t> group_of;
  for (size_t g = 0; g < groups.size(); ++g) {
    for (const Variable& p : groups[g].params) {
      const auto [it, fresh] = group_of.emplace(p.impl(), g);
      TS_CHECK(fresh, kWho, ": parameter '", p.name(), "' is in group ", it->second, " and in group ",
               g, "; each parameter belongs to one group");
    }
  }
  return group_of;
}

}  // namespace

void check_inner_optimizer(const optim::Optimizer* inner, size_t groups) {
  TS_CHECK(inner != nullptr, kWho, ": the factory returned no optimizer");
  TS_CHECK(dynamic_cast<const optim::ElementwiseOptimizer*>(inner) != nullptr, kWho,
           ": the inner optimizer must update each element on its own (SGD, Adam, AdamW: an "
           "optim::ElementwiseOptimizer); stepping pieces of a shard is exact only then");
  TS_CHECK(inner->param_groups().size() == groups, kWho, ": the factory made an optimizer "
           "of ", inner->param_groups().size(), " groups from ", groups,
           "; it must keep the groups it is given");
}

GroupedShardOptimizer::GroupedShardOptimizer(std::vector<FlatShard> shards,
                                             const std::vector<optim::ParamGroup>& groups,
                                             const GroupedOptimizerFactory& make_optimizer,
                                             const Offload& offload)
    : optim::Optimizer(nullptr), shards_(std::move(shards)) {
  TS_CHECK(!shards_.empty(), kWho, ": no shards");
  TS_CHECK(!groups.empty(), kWho, ": no parameter groups");
  const std::map<const VariableImpl*, size_t> group_of = group_of_parameters(groups);
  size_t in_shards = 0;
  for (size_t s = 0; s < shards_.size(); ++s) {
    const FlatShard& f = shards_[s];
    const int64_t held = f.offloaded() ? f.home->numel() : f.shard.numel();
    TS_CHECK(f.params.size() == f.layout.ranges.size() && held == f.range.size(), kWho,
             ": shard ", s, " has ", f.params.size(), " parameters and ", f.layout.ranges.size(),
             " ranges, ", held, " elements for a range of ", f.range.size());
    TS_CHECK(!f.offloaded() || offload.optimizer() != OffloadTier::kDevice, kWho, ": shard ", s,
             " is offloaded (its wrapper's Offload) but this optimizer's state is not: give it "
             "the same Offload (the step streams each offloaded shard with its state)");
    for (const Variable& p : f.params) {
      TS_CHECK(group_of.count(p.impl()) > 0, kWho, ": parameter '", p.name(), "' of shard ", s,
               " is in no parameter group");
    }
    in_shards += f.params.size();
  }
  TS_CHECK(in_shards == group_of.size(), kWho, ": the groups hold ", group_of.size(),
           " parameters, the shards ", in_shards, " (a grouped parameter outside the shards?)");

  // The pieces, shard by shard in flat order: a new piece wherever the group changes.
  std::vector<Piece> flat_order;
  for (size_t s = 0; s < shards_.size(); ++s) {
    const FlatShard& f = shards_[s];
    for (size_t i = 0; i < f.params.size(); ++i) {
      const Range part = intersect(f.layout.ranges[i], f.range);
      if (part.empty()) continue;
      const size_t g = group_of.at(f.params[i].impl());
      const Range within{part.begin - f.range.begin, part.end - f.range.begin};
      Piece* last = flat_order.empty() ? nullptr : &flat_order.back();
      if (last != nullptr && last->shard == s && last->group == g && last->range.end == within.begin) {
        last->range.end = within.end;
      } else {
        flat_order.push_back({s, g, within, Variable()});
      }
    }
  }
  // The inner optimizer's order: group by group. A group this rank holds nothing of gets an
  // empty piece, so that every rank's inner optimizer has the same groups.
  std::vector<optim::ParamGroup> inner_groups;
  for (size_t g = 0; g < groups.size(); ++g) {
    const size_t first = pieces_.size();
    for (const Piece& p : flat_order) {
      if (p.group == g) pieces_.push_back(p);
    }
    if (pieces_.size() == first) pieces_.push_back({0, g, {0, 0}, Variable()});
    std::vector<Variable> views;
    for (size_t k = first; k < pieces_.size(); ++k) {
      Piece& p = pieces_[k];
      // An offloaded shard is empty at rest; its pieces are cut at each step (build_swapper).
      const FlatShard& f = shards_[p.shard];
      p.view = Variable(f.offloaded() ? empty({0}, f.shard.data().options())
                                      : f.shard.data().narrow(0, p.range.begin, p.range.size()),
                        true);
      p.view.set_name("shard" + std::to_string(p.shard) + ".group" + std::to_string(g) + "[" +
                      std::to_string(p.range.begin) + ":" + std::to_string(p.range.end) + "]");
      views.push_back(p.view);
    }
    inner_groups.emplace_back(std::move(views),
                              groups[g].options ? groups[g].options->clone() : nullptr);
  }
  if (offload.any()) {
    build_swapper(std::move(inner_groups), make_optimizer, offload);
  } else {
    inner_ = make_optimizer(std::move(inner_groups));
    check_inner_optimizer(inner_.get(), groups.size());
  }
  // The outer groups: the given parameters, with the options as the inner optimizer completed
  // them (a group without options takes its defaults).
  for (size_t g = 0; g < groups.size(); ++g) {
    Optimizer::add_param_group(
        optim::ParamGroup(groups[g].params, inner().param_groups()[g].options->clone()));
  }
}

GroupedShardOptimizer::~GroupedShardOptimizer() = default;

const optim::Optimizer& GroupedShardOptimizer::inner() const {
  return swapper_ ? swapper_->inner() : *inner_;
}

optim::Optimizer& GroupedShardOptimizer::stepper() {
  return swapper_ ? swapper_->inner() : *inner_;
}

void GroupedShardOptimizer::add_param_group(optim::ParamGroup) {
  TS_FAIL(kWho, ": add_param_group is not supported (the shards are cut by the groups given at "
          "construction)");
}

std::vector<Variable> GroupedShardOptimizer::gradient_variables() const {
  std::vector<Variable> out;
  for (const FlatShard& f : shards_) out.push_back(f.shard);
  return out;
}

void GroupedShardOptimizer::zero_grad(bool set_to_none) {
  for (const FlatShard& f : shards_) {
    f.shard.zero_grad(set_to_none);
    if (f.offloaded()) f.home->clear_gradient();
  }
}

void GroupedShardOptimizer::attach_pieces() {
  for (Piece& p : pieces_) {
    const Variable& shard = shards_[p.shard].shard;
    p.view.set_data(shard.data().narrow(0, p.range.begin, p.range.size()));
    const Tensor& grad = shard.grad();
    p.view.set_grad(grad.defined() ? grad.narrow(0, p.range.begin, p.range.size()) : Tensor());
  }
}

void GroupedShardOptimizer::step() {
  NoGradGuard no_grad;
  // Options a schedule changed since the last step.
  for (size_t g = 0; g < param_groups().size(); ++g) {
    stepper().param_groups()[g].options = param_groups()[g].options->clone();
  }
  if (swapper_) return step_offloaded();
  attach_pieces();
  inner_->step();
  // The shards keep their gradients; the views would keep a released one alive.
  for (Piece& p : pieces_) p.view.zero_grad(/*set_to_none=*/true);
}

StateDict GroupedShardOptimizer::state_dict() const {
  if (swapper_) return offloaded_state_dict();
  StateDict out;
  save_param_groups(out);
  const StateDict inner = inner_->state_dict();
  // Pieces step when their shard has a gradient; every shard of ZeRO has one at every step, so
  // one step count and one set of state names serve all (a shard without pieces, all padding,
  // still gets them, as zeros: every rank then holds the same keys).
  const Tensor* step = nullptr;
  std::vector<std::string> names;
  for (size_t k = 0; k < pieces_.size() && step == nullptr; ++k) {
    step = inner.find(optim::state_key(static_cast<int64_t>(k), "step"));
    if (step == nullptr) continue;
    for (const auto& [name, t] : inner.with_prefix_removed(optim::state_key_prefix(k))) {
      if (name != "step") names.push_back(name);
    }
  }
  if (step == nullptr) return out;
  for (size_t s = 0; s < shards_.size(); ++s) {
    const Tensor& shard = shards_[s].shard.data();
    out.set(optim::state_key(static_cast<int64_t>(s), "step"), step->clone());
    for (const std::string& name : names) {
      Tensor flat = zeros({shard.numel()}, shard.options());
      for (size_t k = 0; k < pieces_.size(); ++k) {
        const Piece& p = pieces_[k];
        if (p.shard != s || p.range.empty()) continue;
        const Tensor* t = inner.find(optim::state_key(static_cast<int64_t>(k), name));
        const Tensor* own_step = inner.find(optim::state_key(static_cast<int64_t>(k), "step"));
        TS_CHECK(t != nullptr && own_step != nullptr && own_step->item() == step->item(), kWho,
                 ": piece ", k, " ('", p.view.name(), "') has not stepped with the others (step ",
                 own_step != nullptr ? own_step->item() : 0.0, ", the others ", step->item(),
                 "): step() after every shard has its gradient");
        flat.narrow(0, p.range.begin, p.range.size()).copy_(t->reshape({-1}));
      }
      out.set(optim::state_key(static_cast<int64_t>(s), name), flat);
    }
  }
  return out;
}

void GroupedShardOptimizer::check_state_key(const std::string& key) const {
  if (key.rfind("param_groups.", 0) == 0) return;  // load_param_groups checks these
  TS_CHECK(optim::parse_state_key(key, shards_.size()).has_value(), kWho,
           "::load_state_dict: key '", key, "' is not 'param_groups.G.NAME' or 'state.S.NAME' "
           "with S a shard index in [0, ", shards_.size(), ")");
}

void GroupedShardOptimizer::load_state_dict(const StateDict& state) {
  if (swapper_) return load_offloaded_state_dict(state);
  StateDict local;
  for (const auto& [key, t] : state) {
    check_state_key(key);
    if (key.rfind("param_groups.", 0) == 0) local.set(key, t);
  }
  for (size_t k = 0; k < pieces_.size(); ++k) {
    const Piece& p = pieces_[k];
    const std::string prefix = optim::state_key_prefix(static_cast<int64_t>(p.shard));
    const int64_t shard_numel = shards_[p.shard].shard.numel();
    for (const auto& [name, t] : state.with_prefix_removed(prefix)) {
      const std::string key = optim::state_key(static_cast<int64_t>(k), name);
      if (name == "step") {
        local.set(key, t);
        continue;
      }
      TS_CHECK(t.numel() == shard_numel, kWho, "::load_state_dict: '", prefix, name, "' has ",
               t.numel(), " elements for shard ", p.shard, " of ", shard_numel);
      local.set(key, t.reshape({-1}).narrow(0, p.range.begin, p.range.size()).clone());
    }
  }
  inner_->load_state_dict(local);  // checks before it changes anything
  load_param_groups(state);
}

}  // namespace zero
}  // namespace dist
}  // namespace tessera
