// zero::GroupedShardOptimizer in one process, every rank's shard simulated: the pieces each
// shard is cut into (literally), AdamW over two groups of different weight decay and learning
// rate stepped shard by shard equals AdamW over the same groups on the whole parameters, its
// per-shard state holds the unsharded state's elements, a reload continues identically, and the
// errors name the parameter.
#include "dist/zero/grouped_shard_optimizer.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "optim/adam.h"
#include "optim/state_keys.h"
#include "tensor/ops.h"
#include "tensor/random.h"
#include "tests/util/expect_error.h"

namespace tessera {
namespace dist {
namespace zero {
namespace {

// w0 [3, 4] and w1 [2, 3] are decayed, b0 [3] and b1 [2] not: the groups interleave in the
// flat vector [w0 | b0 | w1 | b1] (23 elements), as a model's weights and biases do.
struct Model {
  std::vector<Variable> params;
  std::vector<optim::ParamGroup> groups;
};

optim::AdamOptions decayed() { return optim::AdamOptions(1e-2).weight_decay(0.2); }
optim::AdamOptions spared() { return optim::AdamOptions(3e-3).weight_decay(0.0); }

Model make_model() {
  Generator g(5);
  Model m;
  for (const Shape& s : {Shape{3, 4}, Shape{3}, Shape{2, 3}, Shape{2}}) {
    m.params.emplace_back(randn(s, kF32, &g), true);
  }
  m.params[0].set_name("w0");
  m.params[1].set_name("b0");
  m.params[2].set_name("w1");
  m.params[3].set_name("b1");
  m.groups.emplace_back(std::vector<Variable>{m.params[0], m.params[2]}, decayed().clone());
  m.groups.emplace_back(std::vector<Variable>{m.params[1], m.params[3]}, spared().clone());
  return m;
}

Tensor flatten(const std::vector<Tensor>& tensors, int64_t padded) {
  Tensor flat = zeros({padded}, kF32);
  int64_t at = 0;
  for (const Tensor& t : tensors) {
    flat.narrow(0, at, t.numel()).copy_(t.reshape({-1}));
    at += t.numel();
  }
  return flat;
}

// A unit: parameters [first, last) of the model, padded to a multiple of `ranks`, this rank's
// shard of it.
FlatShard shard_of(const Model& m, size_t first, size_t last, int ranks, int rank) {
  FlatShard f;
  std::vector<int64_t> numels;
  std::vector<Tensor> values;
  for (size_t i = first; i < last; ++i) {
    f.params.push_back(m.params[i]);
    numels.push_back(m.params[i].numel());
    values.push_back(m.params[i].data());
  }
  f.layout = flat_layout(numels);
  const int64_t size = padded_size(f.layout.total, ranks) / ranks;
  f.range = {rank * size, (rank + 1) * size};
  const Tensor flat = flatten(values, padded_size(f.layout.total, ranks));
  f.shard = Variable(flat.narrow(0, f.range.begin, size).clone(), true);
  return f;
}

GroupedOptimizerFactory adamw() { return grouped_factory<optim::AdamW>(optim::AdamOptions(1e-3)); }

// Units {0, 2} and {2, 4} of the model over `ranks` simulated ranks: one optimizer per rank.
std::vector<std::unique_ptr<GroupedShardOptimizer>> per_rank(const Model& m, int ranks,
                                                             const std::vector<size_t>& cuts) {
  std::vector<std::unique_ptr<GroupedShardOptimizer>> out;
  for (int r = 0; r < ranks; ++r) {
    std::vector<FlatShard> shards;
    for (size_t u = 0; u + 1 < cuts.size(); ++u) shards.push_back(shard_of(m, cuts[u], cuts[u + 1], ranks, r));
    out.push_back(std::make_unique<GroupedShardOptimizer>(shards, m.groups, adamw()));
  }
  return out;
}

// Gives every rank's shards their part of this step's gradient and steps them; the reference
// (if any) takes the whole gradient.
void step_all(std::vector<std::unique_ptr<GroupedShardOptimizer>>& ranks, optim::Optimizer* reference,
              const Model& ref_model, int step) {
  Generator g(100 + step);
  std::vector<Tensor> grads;
  for (const Variable& p : ref_model.params) grads.push_back(randn(p.shape(), kF32, &g));
  if (reference != nullptr) {
    for (size_t i = 0; i < grads.size(); ++i) ref_model.params[i].set_grad(grads[i]);
    reference->step();
  }
  for (auto& opt : ranks) {
    for (const FlatShard& f : opt->shards()) {
      std::vector<Tensor> unit;
      for (const Variable& p : f.params) {
        for (size_t i = 0; i < ref_model.params.size(); ++i) {
          if (p.name() == ref_model.params[i].name()) unit.push_back(grads[i]);
        }
      }
      const Tensor flat = flatten(unit, f.range.end > f.layout.total ? f.range.end : f.layout.total);
      f.shard.set_grad(flat.narrow(0, f.range.begin, f.range.size()).clone());
    }
    opt->step();
  }
}

// Every parameter's values as the ranks' shards hold them, against the reference's.
double largest_difference(const std::vector<std::unique_ptr<GroupedShardOptimizer>>& ranks,
                          const Model& ref_model) {
  double worst = 0;
  for (const auto& opt : ranks) {
    for (const FlatShard& f : opt->shards()) {
      for (size_t i = 0; i < f.params.size(); ++i) {
        const Range part = intersect(f.layout.ranges[i], f.range);
        if (part.empty()) continue;
        const Variable* ref = nullptr;
        for (const Variable& q : ref_model.params) {
          if (q.name() == f.params[i].name()) ref = &q;
        }
        const Tensor want = ref->data().reshape({-1}).narrow(0, part.begin - f.layout.ranges[i].begin, part.size());
        const Tensor got = f.shard.data().narrow(0, part.begin - f.range.begin, part.size());
        worst = std::max(worst, max_abs_diff(got, want));
      }
    }
  }
  return worst;
}

TEST(GroupedShardOptimizer, CutsEachShardWhereTheGroupChanges) {
  const Model m = make_model();
  // One flat vector over 3 ranks (balanced, as ZeRO-1/2): [0, 8) [8, 16) [16, 23).
  //   rank 0: w0[0:8)                         decay 1 piece, no decay: an empty piece
  //   rank 1: w0[8:12) b0[0:3) w1[0:1)         decay 2 pieces (4, 1), no decay 1 (3)
  //   rank 2: w1[1:6) b1[0:2)                  decay 1 piece (5), no decay 1 (2)
  const std::vector<Range> shards = balanced_shards(23, 3);
  const std::vector<std::vector<std::vector<int64_t>>> expected = {
      {{8}, {0}}, {{4, 1}, {3}}, {{5}, {2}}};
  for (int r = 0; r < 3; ++r) {
    FlatShard f;
    f.params = m.params;
    f.layout = flat_layout({12, 3, 6, 2});
    f.range = shards[r];
    f.shard = Variable(zeros({f.range.size()}, kF32), true);
    GroupedShardOptimizer opt({f}, m.groups, adamw());
    ASSERT_EQ(opt.inner().param_groups().size(), 2u);
    for (size_t g = 0; g < 2; ++g) {
      std::vector<int64_t> sizes;
      for (const Variable& piece : opt.inner().param_groups()[g].params) sizes.push_back(piece.numel());
      EXPECT_EQ(sizes, expected[r][g]) << "rank " << r << " group " << g;
      EXPECT_EQ(opt.inner().param_groups()[g].options->values(),
                (g == 0 ? decayed() : spared()).values());
    }
    // The outer groups are the given ones: an unsharded optimizer's numbering.
    ASSERT_EQ(opt.parameters().size(), 4u);
    EXPECT_TRUE(opt.parameters()[1].is_same(m.params[2]));
  }
}

// The pieces step under their own group's options: the same as AdamW over the groups, element
// for element (one flat vector on 3 ranks, and two padded units on 2, as ZeRO-3's).
TEST(GroupedShardOptimizer, StepsAsTheUnshardedOptimizerOverTheSameGroups) {
  for (const auto& [ranks, cuts] : std::vector<std::pair<int, std::vector<size_t>>>{
           {3, {0, 4}}, {2, {0, 2, 4}}, {4, {0, 1, 3, 4}}}) {
    const Model m = make_model();
    const Model ref = make_model();
    optim::AdamW reference(ref.groups, optim::AdamOptions(1e-3));
    auto opts = per_rank(m, ranks, cuts);
    for (int step = 0; step < 4; ++step) step_all(opts, &reference, ref, step);
    EXPECT_LT(largest_difference(opts, ref), 1e-7) << ranks << " ranks";
    // A test that could not fail would pass with one group too: it does not.
    const Model one = make_model();
    std::vector<optim::ParamGroup> single{optim::ParamGroup(one.params, decayed().clone())};
    Model flat_model = one;
    flat_model.groups = single;
    auto ungrouped = per_rank(flat_model, ranks, cuts);
    const Model ref2 = make_model();
    optim::AdamW reference2(ref2.groups, optim::AdamOptions(1e-3));
    for (int step = 0; step < 4; ++step) step_all(ungrouped, &reference2, ref2, step);
    EXPECT_GT(largest_difference(ungrouped, ref2), 1e-4) << ranks << " ranks";
  }
}

// "state.s.NAME" over shard s holds the unsharded state's elements; loaded into fresh
// optimizers it continues as the uninterrupted ones.
TEST(GroupedShardOptimizer, StatePerShardHoldsTheUnshardedElementsAndReloads) {
  const int ranks = 2;
  const std::vector<size_t> cuts = {0, 2, 4};
  const Model m = make_model();
  const Model ref = make_model();
  optim::AdamW reference(ref.groups, optim::AdamOptions(1e-3));
  auto opts = per_rank(m, ranks, cuts);
  for (int step = 0; step < 3; ++step) step_all(opts, &reference, ref, step);
  const StateDict full = reference.state_dict();
  // Reference numbering: the groups' order (w0, w1, b0, b1).
  const std::vector<std::string> order = {"w0", "w1", "b0", "b1"};
  std::vector<StateDict> saved;
  for (int r = 0; r < ranks; ++r) {
    const StateDict local = opts[r]->state_dict();
    EXPECT_EQ(local.at("param_groups.1.lr").item(), 3e-3);
    for (size_t s = 0; s < opts[r]->shards().size(); ++s) {
      const FlatShard& f = opts[r]->shards()[s];
      EXPECT_EQ(local.at(optim::state_key(s, "step")).item(), 3);
      for (const char* name : {"exp_avg", "exp_avg_sq"}) {
        const Tensor& t = local.at(optim::state_key(s, name));
        ASSERT_EQ(t.numel(), f.range.size());
        for (size_t i = 0; i < f.params.size(); ++i) {
          const Range part = intersect(f.layout.ranges[i], f.range);
          if (part.empty()) continue;
          const int64_t index = std::find(order.begin(), order.end(), f.params[i].name()) - order.begin();
          const Tensor want = full.at(optim::state_key(index, name)).reshape({-1}).narrow(
              0, part.begin - f.layout.ranges[i].begin, part.size());
          EXPECT_LT(max_abs_diff(t.narrow(0, part.begin - f.range.begin, part.size()), want), 1e-7);
        }
      }
    }
    saved.push_back(local);
  }
  // Fresh optimizers over the same shards' values take the state and continue alike.
  auto fresh = per_rank(m, ranks, cuts);
  for (int r = 0; r < ranks; ++r) {
    for (size_t s = 0; s < fresh[r]->shards().size(); ++s) {
      Tensor(fresh[r]->shards()[s].shard.data()).copy_(opts[r]->shards()[s].shard.data());
    }
    fresh[r]->load_state_dict(saved[r]);
  }
  for (int step = 3; step < 5; ++step) {
    step_all(opts, nullptr, ref, step);
    step_all(fresh, nullptr, ref, step);
  }
  for (int r = 0; r < ranks; ++r) {
    for (size_t s = 0; s < opts[r]->shards().size(); ++s) {
      EXPECT_EQ(max_abs_diff(fresh[r]->shards()[s].shard.data(), opts[r]->shards()[s].shard.data()), 0.0);
    }
  }
}

TEST(GroupedShardOptimizer, BadGroupsAreErrorsNamingTheParameter) {
  const Model m = make_model();
  const FlatShard f = shard_of(m, 0, 4, 2, 0);
  std::vector<optim::ParamGroup> twice = m.groups;
  twice[1].params.push_back(m.params[0]);
  testing::expect_error([&] { GroupedShardOptimizer(std::vector<FlatShard>{f}, twice, adamw()); },
                        "parameter 'w0' is in group 0 and in group 1");
  std::vector<optim::ParamGroup> missing = m.groups;
  missing[1].params.pop_back();
  testing::expect_error([&] { GroupedShardOptimizer(std::vector<FlatShard>{f}, missing, adamw()); },
                        "parameter 'b1' of shard 0 is in no parameter group");
  const GroupedOptimizerFactory merged = [](std::vector<optim::ParamGroup> groups) {
    std::vector<Variable> all;
    for (const auto& g : groups) all.insert(all.end(), g.params.begin(), g.params.end());
    return std::make_unique<optim::AdamW>(all);
  };
  testing::expect_error([&] { GroupedShardOptimizer(std::vector<FlatShard>{f}, m.groups, merged); },
                        "it must keep the groups it is given");
  GroupedShardOptimizer opt({f}, m.groups, adamw());
  testing::expect_error([&] { opt.add_param_group(optim::ParamGroup(m.params)); },
                        "add_param_group is not supported");
  StateDict bad;
  bad.set("state.1.step", scalar_tensor(1.0, kI64));
  testing::expect_error([&] { opt.load_state_dict(bad); },
                        "'state.1.step' is not 'param_groups.G.NAME' or 'state.S.NAME'");
}

}  // namespace
}  // namespace zero
}  // namespace dist
}  // namespace tessera
