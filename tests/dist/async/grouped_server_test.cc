// Parameter servers over a GPT with GPT-2's AdamW groups (the Linear weights decayed at 0.1; the
// biases, LayerNorms and embeddings not), on 2 ranks (1 server, 1 worker) and 3 (2 servers, whose
// shards are cut in the middle of a group, and 1 worker). One worker makes the run deterministic:
// each push is one AdamW step at lr, as one process takes it. Against one process stepping
// optim::AdamW over the same groups on the same batches:
//   - after 4 steps the gathered parameters are the one process's, and the servers' states,
//     laid end to end and numbered in the groups' order (server_state.h), are its state key by
//     key (state 0: the decay group's first Linear weight, not the flat vector's first, wte);
//   - a resume from what a checkpoint holds (the model, that state, the clock) continues as the
//     uninterrupted run does, whether the checkpoint came from the servers or from one process;
//     and one process resumes from the servers' checkpoint as it would from its own.
// Each server's optimizer is a dist::zero::GroupedShardOptimizer over its shard, as
// tools/train/asynchronous.cc builds it.
#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "autograd/grad_mode.h"
#include "dist/async/async_worker.h"
#include "dist/async/parameter_server.h"
#include "dist/async/server_state.h"
#include "dist/environment.h"
#include "dist/zero/grouped_shard_optimizer.h"
#include "models/gpt.h"
#include "optim/adam.h"
#include "tensor/ops.h"
#include "tensor/random.h"

namespace tessera {
namespace dist {
namespace {

constexpr double kLr = 1e-3;
constexpr int64_t kBatch = 2, kTime = 16;
constexpr int kSteps = 4, kHalf = 2;

optim::AdamOptions recipe(double weight_decay) {
  return optim::AdamOptions(kLr).betas({0.9, 0.95}).weight_decay(weight_decay);
}

std::shared_ptr<nn::Sequential> gpt(uint64_t seed = 4) {
  manual_seed(seed);
  return models::GPT(models::GPTConfig::tiny());
}

std::vector<optim::ParamGroup> groups_of(nn::Module& model) {
  const auto [decay, no_decay] = models::weight_decay_groups(model);
  std::vector<optim::ParamGroup> groups;
  groups.emplace_back(decay, recipe(0.1).clone());
  groups.emplace_back(no_decay, recipe(0.0).clone());
  return groups;
}

// The order an optimizer over the groups numbers its state.
std::vector<Variable> numbering(const std::vector<optim::ParamGroup>& groups) {
  std::vector<Variable> out;
  for (const optim::ParamGroup& g : groups) out.insert(out.end(), g.params.begin(), g.params.end());
  return out;
}

std::pair<Tensor, Tensor> batch(int step) {
  Generator g(40 + step);
  const Tensor tokens = mul(rand({kBatch, kTime + 1}, kF32, &g), 255.99).to(kI64);
  return {tokens.narrow(1, 0, kTime).contiguous(), tokens.narrow(1, 1, kTime).contiguous()};
}

Variable loss_at(nn::Sequential& model, int step) {
  const auto [x, y] = batch(step);
  return models::lm_loss(model.forward(Variable(x)), y);
}

StateDict state_only(const StateDict& s) {
  StateDict out;
  for (const auto& [key, t] : s) {
    if (key.rfind("state.", 0) == 0) out.set(key, t);
  }
  return out;
}

// One process: AdamW over the groups, steps [from, to), from `state` when given.
struct OneProcess {
  std::shared_ptr<nn::Sequential> model = gpt();
  optim::AdamW opt{groups_of(*model), recipe(0.1)};
  void train(int from, int to) {
    for (int t = from; t < to; ++t) {
      opt.zero_grad();
      loss_at(*model, t).backward();
      opt.step();
    }
  }
};

// The largest |a - b| over the tensors of `want` (each must be in `got`, of its shape).
double largest_difference(const StateDict& got, const StateDict& want, const std::string& what) {
  double worst = 0;
  EXPECT_EQ(got.size(), want.size()) << what;
  for (const auto& [key, t] : want) {
    const Tensor* g = got.find(key);
    EXPECT_NE(g, nullptr) << what << ": no '" << key << "'";
    if (g == nullptr) continue;
    EXPECT_EQ(g->shape(), t.shape()) << what << ": " << key;
    if (g->shape() != t.shape()) continue;
    worst = std::max(worst, max_abs_diff(g->to(kF64), t.to(kF64)));
  }
  return worst;
}

// What a checkpoint holds, on every rank: the model, the unsplit optimizer state, the clock.
struct Saved {
  StateDict model, optimizer;
  int64_t clock = 0;
};

// The servers and the one worker train steps [from, to) of the GPT (from `resume` when given),
// then every rank gathers the model; the returned Saved holds the model, the clock (the pushes
// made) and, on rank 0, the servers' optimizer state in the unsplit model's format.
Saved train_async(int servers, int from, int to, const Saved* resume) {
  auto world = dist::world();
  const AsyncOptions options = AsyncOptions().servers(servers);
  auto model = gpt(resume ? 11 : 4);  // a resumed run starts from another init, then loads
  const std::vector<Variable> params = model->parameters();
  const std::vector<optim::ParamGroup> groups = groups_of(*model);
  Saved out;
  if (world->rank() < servers) {
    std::vector<int64_t> numels;
    int64_t numel = 0;
    for (const Variable& p : params) {
      numels.push_back(p.numel());
      numel += p.numel();
    }
    const ParameterServerLayout layout(world->size(), options, numel);
    const int me = world->rank();
    ParameterServer server(params, world, [&](std::vector<Variable> shard) {
      const int64_t begin = layout.shard_offset(me);
      zero::FlatShard flat{shard.at(0), params, zero::flat_layout(numels),
                           {begin, begin + layout.shard_numel(me)}};
      return std::make_unique<zero::GroupedShardOptimizer>(
          std::vector<zero::FlatShard>{flat}, groups, zero::grouped_factory<optim::AdamW>(recipe(0.1)));
    }, options);
    if (resume != nullptr) {
      {
        NoGradGuard no_grad;
        model->load_state_dict(resume->model);
      }
      server.load_parameters(params);
      server.optimizer().load_state_dict(
          shard_optimizer_state(resume->optimizer, layout, me, params, numbering(groups)));
      server.restore_clocks({resume->clock});
    }
    server.serve_until(to);
    const std::vector<StateDict> states = server.gather_optimizer_states();
    out.clock = server.clocks().at(0);
    server.serve_to_end();
    server.gather_parameters(params);
    if (me == 0) {
      out.optimizer = unsplit_optimizer_state(states, layout, params, numbering(groups));
      for (const auto& [key, t] : server.optimizer().state_dict()) {
        if (key.rfind("param_groups.", 0) == 0) out.optimizer.set(key, t);
      }
    }
  } else {
    AsyncWorker worker(params, world, kLr, options);
    if (resume != nullptr) worker.restore_clock(resume->clock);
    for (int t = from; t < to; ++t) {
      worker.pull();
      worker.zero_grad();
      loss_at(*model, t).backward();
      worker.step();
    }
    out.clock = worker.clock();
    worker.finish();
    worker.gather_parameters();
  }
  out.model = model->state_dict();
  return out;
}

// The keys, shapes and dtypes of the one process's optimizer state.
StateDict straight_keys() {
  OneProcess like;
  like.train(0, 1);
  return like.opt.state_dict();
}

class GroupedServers : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    if (dist::world()->size() - GetParam() != 1) {
      GTEST_SKIP() << GetParam() << " server(s) and one worker need " << GetParam() + 1 << " ranks";
    }
  }
};

TEST_P(GroupedServers, OneWorkerEqualsOneProcessAndItsStateIsNumberedByTheGroups) {
  const int servers = GetParam();
  const Saved run = train_async(servers, 0, kSteps, nullptr);
  OneProcess one;
  one.train(0, kSteps);
  const double parameters = largest_difference(run.model, one.model->state_dict(), "parameters");
  EXPECT_LT(parameters, 1e-6);
  EXPECT_EQ(run.clock, kSteps);
  if (dist::world()->rank() != 0) return;
  const StateDict want = state_only(one.opt.state_dict());
  ASSERT_EQ(want.size(), 3u * one.opt.parameters().size());  // step, exp_avg, exp_avg_sq
  const double state = largest_difference(state_only(run.optimizer), want, "optimizer state");
  EXPECT_LT(state, 1e-6);
  std::printf("gpt-tiny, %d server(s), 1 worker, %d AdamW steps over GPT-2's groups: largest "
              "difference from one process %.3g (parameters), %.3g (optimizer state)\n",
              servers, kSteps, parameters, state);
  // Numbered by the groups: state 0 is the decay group's first Linear weight's, not wte's.
  EXPECT_EQ(run.optimizer.at("state.0.exp_avg").shape(), one.opt.parameters()[0].shape());
  EXPECT_NE(one.opt.parameters()[0].shape(), one.model->parameters()[0].shape());
}

TEST_P(GroupedServers, ResumesContinueTheUninterruptedRunFromEitherSide) {
  const int servers = GetParam();
  const bool lead = dist::world()->rank() == 0;
  OneProcess straight;
  straight.train(0, kSteps);
  // Servers -> servers.
  Saved half = train_async(servers, 0, kHalf, nullptr);
  // Every server loads the state rank 0 holds: broadcast, key by key, with the keys and shapes
  // of the one process's state (which the servers' equals).
  auto share = [](StateDict& s) {
    auto world = dist::world();
    for (const auto& [key, t] : straight_keys()) {
      Tensor v = world->rank() == 0 ? s.at(key).contiguous() : empty(t.shape(), t.dtype());
      world->broadcast(v, 0)->wait();
      s.set(key, v);
    }
  };
  share(half.optimizer);
  const Saved resumed = train_async(servers, kHalf, kSteps, &half);
  EXPECT_LT(largest_difference(resumed.model, straight.model->state_dict(), "servers -> servers"),
            1e-6);
  // Servers -> one process: the servers' state is the one process's, numbered alike.
  OneProcess from_servers;
  {
    NoGradGuard no_grad;
    from_servers.model->load_state_dict(half.model);
  }
  from_servers.opt.load_state_dict(half.optimizer);
  from_servers.train(kHalf, kSteps);
  EXPECT_LT(largest_difference(from_servers.model->state_dict(), straight.model->state_dict(),
                               "servers -> one process"), 1e-6);
  // One process -> servers.
  OneProcess first;
  first.train(0, kHalf);
  Saved own{first.model->state_dict(), first.opt.state_dict(), kHalf};
  const Saved from_one = train_async(servers, kHalf, kSteps, &own);
  const double worst = largest_difference(from_one.model, straight.model->state_dict(),
                                          "one process -> servers");
  EXPECT_LT(worst, 1e-6);
  if (lead) {
    std::printf("%d server(s): resumed from the servers' checkpoint and from one process's, "
                "largest difference from the uninterrupted run %.3g\n", servers, worst);
  }
}

INSTANTIATE_TEST_SUITE_P(Servers, GroupedServers, ::testing::Values(1, 2));

}  // namespace
}  // namespace dist
}  // namespace tessera
