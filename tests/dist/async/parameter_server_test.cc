// Asynchronous SGD with parameter servers on 3 and 4 ranks (1 server and 2-3 workers, or 2 and
// 2), against references written out here:
//   - bound 0 with plain SGD equals synchronous SGD in one process (the mean of the workers'
//     gradients each step), on every rank after gather_parameters;
//   - with made-up gradients g = (w + 1)(t + 1) and no bound, a straggler reordering everything,
//     the final parameters are init - lr / W sum_w sum_t g: every push applied exactly once;
//   - under a straggler, bound 1 keeps every worker's lag <= 1 and the updates between a pull
//     and its push <= (W - 1) x 3, while without a bound the lag grows past 1;
//   - servers and workers resumed from what a checkpoint holds (the whole model, the optimizer
//     state in the unsplit model's format, the workers' clocks) start exactly where the saved
//     ones stopped, and train on with their clocks continued;
//   - with shared batches, each batch of every epoch is trained on exactly once (the gradient of
//     batch b is the b-th unit vector, so the final parameters show every batch's count), and a
//     straggler takes fewer than its 1/W share.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "dist/async/async_worker.h"
#include "dist/async/parameter_server.h"
#include "dist/async/server_state.h"
#include "dist/environment.h"
#include "models/simple.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "tensor/ops.h"
#include "tensor/random.h"
#include "tensor/safetensors.h"

namespace tessera {
namespace dist {
namespace {

constexpr double kLr = 0.1;

std::shared_ptr<nn::Sequential> mlp() {
  manual_seed(43);
  auto m = models::MLP(10, 8, 3);
  m->to(kF64);
  return m;
}

std::pair<Tensor, Tensor> worker_batch(int step, int worker) {
  Generator g(97 * step + worker);
  const Tensor x = randn({4, 10}, kF64, &g);
  return {x, argmax(x.narrow(1, 0, 3), 1)};
}

ParameterServer::OptimizerFactory plain_sgd() {
  return [](std::vector<Variable> shard) {
    return std::make_unique<optim::SGD>(shard, optim::SGDOptions(kLr));
  };
}

// Trains `steps` iterations of the MLP: servers serve, workers pull, compute, push; then the
// final model is gathered on every rank. `straggler`: that worker sleeps after each backward.
struct AsyncRun {
  std::shared_ptr<nn::Sequential> model;
  StalenessStats staleness;  // over all servers
  std::vector<int64_t> updates_per_worker;  // this server's (empty on a worker)
  int64_t updates_applied = 0;
};
AsyncRun train(const AsyncOptions& options, int steps, int straggler = -1, double sleep_ms = 0) {
  auto world = dist::world();
  AsyncRun run;
  run.model = mlp();
  const std::vector<Variable> params = run.model->parameters();
  StalenessStats mine;
  if (world->rank() < options.servers()) {
    ParameterServer server(params, world, plain_sgd(), options);
    server.serve_to_end();
    server.gather_parameters(params);
    mine = server.staleness();
    run.updates_per_worker = server.updates_per_worker();
    run.updates_applied = server.updates_applied();
  } else {
    AsyncWorker worker(params, world, kLr, options);
    for (int t = 0; t < steps; ++t) {
      worker.pull();
      worker.zero_grad();
      const auto [x, y] = worker_batch(t, worker.worker());
      cross_entropy(run.model->forward(Variable(x)), y).backward();
      if (worker.worker() == straggler) {
        std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(sleep_ms));
      }
      worker.step();
    }
    worker.finish();
    worker.gather_parameters();
  }
  run.staleness = mine.sum_over(*world);
  return run;
}

void expect_synchronous(int servers) {
  auto world = dist::world();
  const int workers = world->size() - servers;
  constexpr int kSteps = 4;
  const AsyncRun run = train(AsyncOptions().servers(servers).staleness_bound(0), kSteps);
  // One process: each step the mean of the workers' gradients at the same parameters.
  auto sim = mlp();
  for (int t = 0; t < kSteps; ++t) {
    std::vector<Tensor> mean;
    for (int w = 0; w < workers; ++w) {
      sim->zero_grad();
      const auto [x, y] = worker_batch(t, w);
      cross_entropy(sim->forward(Variable(x)), y).backward();
      const std::vector<Variable> ps = sim->parameters();
      for (size_t k = 0; k < ps.size(); ++k) {
        const Tensor g = div(ps[k].grad(), static_cast<double>(workers));
        if (w == 0) mean.push_back(g); else mean[k] = add(mean[k], g);
      }
    }
    const std::vector<Variable> ps = sim->parameters();
    for (size_t k = 0; k < ps.size(); ++k) Tensor(ps[k].data()).copy_(sub(ps[k].data(), mul(mean[k], kLr)));
  }
  const std::vector<Variable> got = run.model->parameters(), want = sim->parameters();
  for (size_t k = 0; k < got.size(); ++k) {
    EXPECT_LT(max_abs_diff(got[k].data(), want[k].data()), 1e-12) << got[k].name();
  }
  // Bound 0: nobody ahead; each push follows at most the other W - 1 pushes of its iteration.
  EXPECT_EQ(run.staleness.count(), static_cast<int64_t>(kSteps) * workers * servers);
  EXPECT_EQ(run.staleness.max_lag(), 0);
  EXPECT_LE(run.staleness.max(), workers - 1);
}

TEST(ParameterServer, BoundZeroEqualsSynchronousSgdWithOneServer) { expect_synchronous(1); }

TEST(ParameterServer, BoundZeroEqualsSynchronousSgdWithTwoServers) {
  if (dist::world()->size() < 4) GTEST_SKIP() << "two servers need two workers too";
  expect_synchronous(2);
}

// Bound 0 applies a round's pushes in worker order, whatever order they arrive in. With Adam (one
// step a push, so the order shows) and the first and the last worker late by turns, the servers'
// model equals, bit for bit, one process stepping Adam at lr / W on each worker's gradient in
// worker order, every gradient taken at the round's starting parameters. (Applied in arrival
// order, as before, the odd steps' pushes went the other way round.)
TEST(ParameterServer, BoundZeroAppliesARoundsPushesInWorkerOrder) {
  auto world = dist::world();
  constexpr int kSteps = 4;
  for (int servers = 1; servers <= world->size() - 2; ++servers) {
    const int workers = world->size() - servers;
    const AsyncOptions options = AsyncOptions().servers(servers).staleness_bound(0);
    auto model = mlp();
    const std::vector<Variable> params = model->parameters();
    if (world->rank() < servers) {
      ParameterServer server(params, world, [](std::vector<Variable> shard) {
        return std::make_unique<optim::Adam>(shard, optim::AdamOptions(kLr));
      }, options);
      server.serve_to_end();
      server.gather_parameters(params);
    } else {
      AsyncWorker worker(params, world, kLr, options);
      for (int t = 0; t < kSteps; ++t) {
        worker.pull();
        worker.zero_grad();
        const auto [x, y] = worker_batch(t, worker.worker());
        cross_entropy(model->forward(Variable(x)), y).backward();
        const int late = t % 2 == 0 ? 0 : workers - 1;
        if (worker.worker() == late) std::this_thread::sleep_for(std::chrono::milliseconds(20));
        worker.step();
      }
      worker.finish();
      worker.gather_parameters();
    }
    auto sim = mlp();
    const std::vector<Variable> ps = sim->parameters();
    optim::Adam adam(ps, optim::AdamOptions(kLr / workers));
    for (int t = 0; t < kSteps; ++t) {
      std::vector<std::vector<Tensor>> grads(workers);
      for (int w = 0; w < workers; ++w) {
        sim->zero_grad();
        const auto [x, y] = worker_batch(t, w);
        cross_entropy(sim->forward(Variable(x)), y).backward();
        for (const Variable& p : ps) grads[w].push_back(p.grad().clone());
      }
      for (int w = 0; w < workers; ++w) {
        for (size_t k = 0; k < ps.size(); ++k) ps[k].set_grad(grads[w][k]);
        adam.step();
      }
    }
    for (size_t k = 0; k < ps.size(); ++k) {
      EXPECT_EQ(max_abs_diff(params[k].data(), ps[k].data()), 0)
          << params[k].name() << ", " << servers << " server(s)";
    }
  }
}

TEST(ParameterServer, EveryPushIsAppliedExactlyOnce) {
  auto world = dist::world();
  for (int servers = 1; servers <= world->size() - 2; ++servers) {
    const AsyncOptions options = AsyncOptions().servers(servers);  // unbounded
    const int workers = world->size() - servers;
    constexpr int kSteps = 6;
    Variable p(zeros({7}, kF64), true);
    const Tensor init = from_vector<double>({1, -2, 3, -4, 5, -6, 7}, {7}, TensorOptions(kF64));
    if (world->rank() == 0) Tensor(p.data()).copy_(init);  // the broadcast spreads rank 0's
    if (world->rank() < servers) {
      ParameterServer server({p}, world, plain_sgd(), options);
      server.serve_to_end();
      server.gather_parameters({p});
      EXPECT_EQ(server.updates_applied(), static_cast<int64_t>(kSteps) * workers);
      for (int64_t n : server.updates_per_worker()) EXPECT_EQ(n, kSteps);
    } else {
      AsyncWorker worker({p}, world, kLr, options);
      for (int t = 0; t < kSteps; ++t) {
        worker.pull();
        // Worker 0 is slow, so the others' pushes overtake its.
        if (worker.worker() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        p.set_grad(full({7}, (worker.worker() + 1.0) * (t + 1.0), kF64));
        worker.step();
      }
      worker.finish();
      worker.gather_parameters();
    }
    // sum_w sum_t (w + 1)(t + 1) = (W (W + 1) / 2) (T (T + 1) / 2)
    const double total = workers * (workers + 1) / 2.0 * (kSteps * (kSteps + 1) / 2.0);
    const Tensor want = sub(init, kLr / workers * total);
    EXPECT_LT(max_abs_diff(p.data(), want), 1e-12) << servers << " server(s)";
  }
}

TEST(ParameterServer, UnderAStragglerTheStalenessStaysWithinTheBound) {
  const int workers = dist::world()->size() - 1;
  constexpr int kSteps = 10;
  const AsyncRun bounded = train(AsyncOptions().staleness_bound(1), kSteps, /*straggler=*/0, 15);
  EXPECT_EQ(bounded.staleness.count(), static_cast<int64_t>(kSteps) * workers);
  EXPECT_LE(bounded.staleness.max_lag(), 1);
  EXPECT_LE(bounded.staleness.max(), (workers - 1) * 3);
  // Without the bound the fast workers run ahead of the straggler: the bound above did work.
  const AsyncRun free = train(AsyncOptions(), kSteps, /*straggler=*/0, 15);
  EXPECT_GT(free.staleness.max_lag(), 1);
  EXPECT_GT(free.staleness.max(), (workers - 1) * 3);
}

ParameterServer::OptimizerFactory momentum_sgd() {
  return [](std::vector<Variable> shard) {
    return std::make_unique<optim::SGD>(shard, optim::SGDOptions(kLr).momentum(0.9));
  };
}

// The "state.*" entries of a state dict, equal bit for bit.
void expect_same_state(const StateDict& got, const StateDict& want, const std::string& what) {
  int compared = 0;
  for (const auto& [key, t] : want) {
    if (key.rfind("state.", 0) != 0) continue;
    const Tensor* g = got.find(key);
    ASSERT_NE(g, nullptr) << what << ": " << key;
    ASSERT_EQ(g->shape(), t.shape()) << what << ": " << key;
    EXPECT_EQ(max_abs_diff(g->to(kF64), t.to(kF64)), 0) << what << ": " << key;
    ++compared;
  }
  EXPECT_EQ(compared, 2) << what;  // step, momentum_buffer
}

// Checkpoints between epochs. kSteps unbounded iterations under a straggler (an order no run
// repeats), then what a checkpoint holds is written to a file by server 0: the whole model
// (gathered), the servers' optimizer states in the unsplit model's format, the clocks. New
// servers and workers over a model initialized otherwise load it: each server's shard, optimizer
// state and clocks are exactly those saved, and they train kSteps more, the clocks continuing
// (a request whose clock a server does not expect is an error).
TEST(ParameterServer, ResumedServersHoldExactlyWhatWasSavedAndTrainOn) {
  auto world = dist::world();
  constexpr int kSteps = 4;
  for (int servers = 1; servers <= world->size() - 2; ++servers) {
    const AsyncOptions options = AsyncOptions().servers(servers);
    const int workers = world->size() - servers;
    const bool is_server = world->rank() < servers;
    const std::string file =
        ::testing::TempDir() + "/async_resume_" + std::to_string(servers) + ".safetensors";
    StateDict saved_state;  // this server's optimizer's
    Tensor saved_shard;
    {
      auto model = mlp();
      const std::vector<Variable> params = model->parameters();
      if (is_server) {
        ParameterServer server(params, world, momentum_sgd(), options);
        server.serve_until(kSteps);
        for (const auto& [key, t] : server.optimizer().state_dict()) saved_state.set(key, t.clone());
        saved_shard = server.shard().data().clone();
        const std::vector<int64_t> clocks = server.clocks();
        EXPECT_EQ(clocks, std::vector<int64_t>(workers, kSteps));
        const std::vector<StateDict> states = server.gather_optimizer_states();
        server.gather_parameters(params);
        if (world->rank() == 0) {
          StateDict checkpoint;
          checkpoint.merge(model->state_dict(), "model.");
          StateDict optimizer = unsplit_optimizer_state(states, server.layout(), params);
          // The options: the tool saves its schedule's (the servers run at lr / W a push).
          for (const auto& [key, t] : saved_state) {
            if (key.rfind("param_groups.", 0) == 0) optimizer.set(key, t);
          }
          checkpoint.merge(optimizer, "optimizer.");
          checkpoint.set("clocks", from_vector<int64_t>(clocks, {workers}));
          save_safetensors(file, checkpoint);
        }
      } else {
        AsyncWorker worker(params, world, kLr, options);
        for (int t = 0; t < kSteps; ++t) {
          worker.pull();
          worker.zero_grad();
          const auto [x, y] = worker_batch(t, worker.worker());
          cross_entropy(model->forward(Variable(x)), y).backward();
          if (worker.worker() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
          worker.step();
        }
        worker.gather_parameters();
      }
    }
    world->barrier()->wait();
    const StateDict checkpoint = load_safetensors(file).tensors;
    std::vector<int64_t> clocks;
    for (int w = 0; w < workers; ++w) {
      clocks.push_back(static_cast<int64_t>(checkpoint.at("clocks").to(kF64).data<double>()[w]));
    }
    manual_seed(7);  // not the saved model's initialization
    auto model = models::MLP(10, 8, 3);
    model->to(kF64);
    const std::vector<Variable> params = model->parameters();
    if (is_server) {
      ParameterServer server(params, world, momentum_sgd(), options);
      {
        NoGradGuard no_grad;
        model->load_state_dict(checkpoint.with_prefix_removed("model."));
      }
      server.load_parameters(params);
      server.optimizer().load_state_dict(shard_optimizer_state(
          checkpoint.with_prefix_removed("optimizer."), server.layout(), world->rank(), params));
      server.restore_clocks(clocks);
      EXPECT_EQ(max_abs_diff(server.shard().data(), saved_shard), 0) << servers << " server(s)";
      expect_same_state(server.optimizer().state_dict(), saved_state,
                        std::to_string(servers) + " server(s)");
      EXPECT_EQ(server.clocks(), clocks);
      server.serve_to_end();
      EXPECT_EQ(server.updates_per_worker(), std::vector<int64_t>(workers, 2 * kSteps));
      EXPECT_EQ(server.updates_applied(), 2 * kSteps * workers);
    } else {
      AsyncWorker worker(params, world, kLr, options);
      worker.restore_clock(clocks[worker.worker()]);
      for (int t = kSteps; t < 2 * kSteps; ++t) {
        worker.pull();
        worker.zero_grad();
        const auto [x, y] = worker_batch(t, worker.worker());
        cross_entropy(model->forward(Variable(x)), y).backward();
        worker.step();
      }
      EXPECT_EQ(worker.clock(), 2 * kSteps);
      worker.finish();
    }
    world->barrier()->wait();  // nobody still reads the file the next round rewrites
  }
}

TEST(ParameterServer, SharedBatchesTrainEachBatchOnceAndTheStragglerTakesFewer) {
  auto world = dist::world();
  constexpr int64_t kBatches = 12;
  constexpr int kEpochs = 2;
  for (int servers = 1; servers <= world->size() - 2; ++servers) {
    const AsyncOptions options = AsyncOptions().servers(servers).shared_batches(true);
    const int workers = world->size() - servers;
    Variable p(zeros({kBatches}, kF64), true);
    if (world->rank() < servers) {
      ParameterServer server({p}, world, plain_sgd(), options);
      for (int e = 0; e < kEpochs; ++e) server.serve_epoch(e, kBatches);
      server.serve_to_end();
      server.gather_parameters({p});
      EXPECT_EQ(server.updates_applied(), kEpochs * kBatches);
      if (world->rank() == 0) {
        const std::vector<int64_t> taken = server.batches_per_worker();
        ASSERT_EQ(taken.size(), static_cast<size_t>(workers));
        int64_t total = 0;
        for (int64_t n : taken) total += n;
        EXPECT_EQ(total, kEpochs * kBatches);
        // Worker 0 sleeps 250 ms on its first batch of an epoch (10 ms on the others), while
        // the others drain the queue: it takes less than its share.
        EXPECT_LT(taken[0], kEpochs * kBatches / workers) << servers << " server(s)";
      } else {
        EXPECT_TRUE(server.batches_per_worker().empty());
      }
    } else {
      AsyncWorker worker({p}, world, kLr, options);
      for (int e = 0; e < kEpochs; ++e) {
        bool first = true;
        for (int64_t b; (b = worker.pull_batch(e)) != SharedBatchQueue::kEpochEnd; first = false) {
          ASSERT_TRUE(b >= 0 && b < kBatches) << b;
          // A straggler whose lag outlasts a busy 2-core machine's scheduling noise (10 ms a
          // batch alone let an oversubscribed run hand it 11 of 24 batches).
          if (worker.worker() == 0) {
            std::this_thread::sleep_for(std::chrono::milliseconds(first ? 250 : 10));
          }
          Tensor g = zeros({kBatches}, kF64);
          g.data<double>()[b] = 1;
          p.set_grad(g);
          worker.step();
        }
        EXPECT_FALSE(worker.pulled());
      }
      worker.finish();
      worker.gather_parameters();
    }
    // Every batch once per epoch, each push applied with lr / W.
    const Tensor want = full({kBatches}, -kLr / workers * kEpochs, kF64);
    EXPECT_LT(max_abs_diff(p.data(), want), 1e-12) << servers << " server(s)";
  }
}

TEST(ParameterServer, BadLayoutsAreNamed) {
  auto world = dist::world();
  auto model = mlp();
  try {
    ParameterServer(model->parameters(), world, plain_sgd(),
                    AsyncOptions().servers(world->size()));
    FAIL();
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("leaves 0 workers"), std::string::npos) << e.what();
  }
  // Shared batches need the unbounded staleness (checked before any message).
  try {
    ParameterServerLayout(world->size(), AsyncOptions().staleness_bound(2).shared_batches(true), 10);
    FAIL();
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("shared batches with staleness bound 2"), std::string::npos)
        << e.what();
  }
  // The role of each rank is fixed by the layout.
  if (world->rank() == 0) {
    EXPECT_THROW(AsyncWorker(model->parameters(), world, kLr, AsyncOptions()), std::exception);
  } else {
    EXPECT_THROW(ParameterServer(model->parameters(), world, plain_sgd(), AsyncOptions()),
                 std::exception);
  }
}

}  // namespace
}  // namespace dist
}  // namespace tessera
