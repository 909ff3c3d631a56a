// The same training with ZeRO-3 (FSDP): parameters, gradients and optimizer state are sharded
// across ranks; each unit of the model is gathered whole only around its own forward and
// backward. The model is example::Net, a module of our own (its own forward), its units chosen
// by an auto-wrap policy as PyTorch's FSDP chooses them (examples/pytorch/fsdp.py).
//
//   bazel build -c opt //examples:fsdp
//   mpirun -np 2 --oversubscribe --allow-run-as-root bazel-bin/examples/fsdp --steps=20
#include <cmath>
#include <cstdio>

#include "examples/net.h"

using namespace tessera;

int train(int64_t steps, const std::shared_ptr<dist::ProcessGroup>& world) {
  manual_seed(0);
  // conv2 (4,640 parameters) and fc (15,690) become units; conv1 and bn1 stay in the root.
  dist::FullyShardedDataParallel model(
      std::make_shared<example::Net>(), world,
      dist::FullyShardedOptions().auto_wrap_policy(dist::size_based_wrap_policy(1000)));
  optim::AdamW opt(model.shard_parameters(), optim::AdamWOptions(2e-3).weight_decay(1e-2));

  auto train = std::make_shared<data::FashionMNISTDataset>("train");
  const int r = world->rank(), n = world->size();
  data::DataLoader loader(train, data::DataLoaderOptions(64),
                          std::make_shared<data::DistributedSampler>(
                              train->size(), data::DistributedSamplerOptions(n, r).seed(0)));
  double mean_loss = 0;
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    int64_t step = 0;
    for (data::Batch& b : loader.epoch(epoch)) {
      Variable loss = cross_entropy(model(b.inputs), b.targets);
      opt.zero_grad();
      loss.backward();  // each unit's gradient is reduce-scattered to its shards as it is ready
      model.clip_grad_norm(5.0);
      opt.step();       // steps this rank's shards only
      mean_loss = dist::all_reduce_scalar(loss.item(), *world, dist::ReduceOp::kMean);
      ++step;
      if (r == 0 && step % 100 == 0) {
        std::printf("epoch %lld step %lld loss %.4f\n", (long long)epoch, (long long)step, mean_loss);
      }
      if (step == steps) break;
    }
  }

  // The whole model, gathered (collective: every rank calls it), loads into an unwrapped Net.
  dist::sync_buffers(model.module(), *world);
  auto plain = std::make_shared<example::Net>();
  plain->load_state_dict(model.state_dict());
  if (r == 0) {
    std::printf("%d ranks, %zu units: last loss %.4f\n", n, model.units().size(), mean_loss);
    nn::save_weights(*plain, "/tmp/fsdp_example.safetensors");
  }
  return std::isfinite(mean_loss) ? 0 : 1;
}

int main(int argc, char** argv) {
  const int64_t steps = example::steps_flag(argc, argv);
  auto world = dist::init(&argc, &argv);
  return dist::run_or_abort([&] { return train(steps, world); });
}
