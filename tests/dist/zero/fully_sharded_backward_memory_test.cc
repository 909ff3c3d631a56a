// ZeRO-3's backward really frees what it gathers: the allocator's peak during a backward, above
// what the forward left (activations, shards), stays within what the design holds at once,
// written out from fully_sharded.h and flat_parameter.cc:
//
//   (1 + prefetch_limit) units gathered      the unit in backward and the ones prefetched
// + 1 unit's flat gradient                   grad_flat_ of the unit being reduced
// + 1 unit's flat gradient in flight         the previous unit's reduce-scatter (pending_)
// + 2 unit shards                            reduced_ of those two
// + 1 unit and 1 shard on the comm thread    the ring reduce-scatter works on a copy of its
//                                            input and receives into a shard-sized buffer
//                                            (dist/process_group_mpi.cc), while it runs
// + the shard gradients (psi / N)            what backward leaves behind (the steady state)
// + a unit's parameter-gradient transient    its backward's .grad() (and any temporary of the
//                                            GEMM that makes it) before grad_flat_ takes it
// + the activations' gradients
//
// with "unit" the largest unit. The last two are measured on unwrapped layers, not on FSDP:
// the activations' gradients on the whole model with its parameters frozen and its input
// requiring a gradient (so only they flow); the parameter-gradient transient as one unwrapped
// unit's backward peak with its parameters trainable minus frozen. Six equal
// units and the root make the bound mean something: without resharding, the backward would end
// holding all seven units gathered (the last assertion).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "autograd/functions.h"
#include "dist/environment.h"
#include "dist/zero/fully_sharded.h"
#include "nn/activation.h"
#include "nn/linear.h"
#include "tensor/allocator.h"
#include "tensor/ops.h"
#include "tensor/random.h"

namespace tessera {
namespace dist {
namespace {

constexpr int64_t kWidth = 96;

// Six Linear(96, 96) units (9,312 parameters each) with ReLUs, and Linear(96, 10) as the root.
std::shared_ptr<nn::Sequential> deep_mlp() {
  manual_seed(29);
  auto m = std::make_shared<nn::Sequential>();
  for (int i = 0; i < 6; ++i) {
    m->push_back(std::make_shared<nn::Linear>(kWidth, kWidth));
    m->push_back(std::make_shared<nn::ReLU>());
  }
  m->push_back(std::make_shared<nn::Linear>(kWidth, 10));
  m->to(kF64);
  return m;
}

// The loss of this rank's small batch (activations are tiny beside the parameters).
Variable loss_of(const std::function<Variable(const Variable&)>& forward, int rank,
                 bool input_requires_grad = false) {
  Generator g(40 + rank);
  const Tensor x = randn({4, kWidth}, kF64, &g);
  return cross_entropy(forward(Variable(x, input_requires_grad)), argmax(x.narrow(1, 0, 10), 1));
}

// Bytes a backward allocates, at its peak, beyond what was in use when it started.
int64_t backward_peak(Variable loss) {
  const int64_t base = memory_stats(Device::cpu()).current_bytes;
  reset_peak(Device::cpu());
  loss.backward();
  return memory_stats(Device::cpu()).peak_bytes - base;
}

TEST(FullyShardedMemory, BackwardFreesWhatItGathersWithinTheDesignsBound) {
  auto world = dist::world();
  const int N = world->size(), r = world->rank();
  auto frozen = deep_mlp();
  for (const Variable& p : frozen->parameters()) p.set_requires_grad(false);
  const int64_t activation_grads = backward_peak(
      loss_of([&](const Variable& x) { return frozen->forward(x); }, r, /*input_requires_grad=*/true));
  // One unit (Linear(96, 96)) alone: its backward's peak with trainable parameters minus frozen.
  auto layer = deep_mlp();
  const auto one_unit = [&](const Variable& x) { return narrow((*layer)[0]->forward(x), 1, 0, 10); };
  const int64_t trainable = backward_peak(loss_of(one_unit, r, /*input_requires_grad=*/true));
  for (const Variable& p : layer->parameters()) p.set_requires_grad(false);
  const int64_t parameter_grads =
      trainable - backward_peak(loss_of(one_unit, r, /*input_requires_grad=*/true));

  for (int limit : {0, 1}) {
    FullyShardedDataParallel fsdp(deep_mlp(), world,
                                  FullyShardedOptions().min_num_params(1000).prefetch_limit(limit));
    ASSERT_EQ(fsdp.units().size(), 7u);  // six units and the root
    int64_t unit = 0, shards = 0, all_units = 0;
    for (const auto& u : fsdp.units()) {
      unit = std::max(unit, 8 * u->padded_numel());
      shards += 8 * u->shard_numel();
      all_units += 8 * u->padded_numel();
    }
    const int64_t bound = (1 + limit) * unit + 2 * unit + 2 * unit / N + (unit + unit / N) +
                          shards + parameter_grads + activation_grads;
    const int64_t peak = backward_peak(loss_of([&](const Variable& x) { return fsdp.forward(x); }, r));
    if (r == 0) {
      std::printf("ZeRO-3 backward peak on rank 0 (prefetch_limit %d, N = %d): measured %lld; "
                  "bound (%d + 3) x unit %lld + 3 shards + shard grads %lld + parameter-gradient "
                  "transient %lld + activation grads %lld = %lld; all units gathered would be "
                  "%lld\n",
                  limit, N, static_cast<long long>(peak), 1 + limit, static_cast<long long>(unit),
                  static_cast<long long>(shards), static_cast<long long>(parameter_grads),
                  static_cast<long long>(activation_grads), static_cast<long long>(bound),
                  static_cast<long long>(all_units));
    }
    EXPECT_LE(peak, bound) << "rank " << r;
    EXPECT_GE(peak, unit + shards);         // a unit is gathered, and the shard gradients stay
    EXPECT_LT(peak - shards, all_units);    // not every unit is gathered at once
    for (const auto& u : fsdp.units()) {
      EXPECT_FALSE(u->gathered() || u->gathering() || u->reduce_scatter_pending()) << u->name();
    }
  }
}

}  // namespace
}  // namespace dist
}  // namespace tessera
