// The same training with data parallelism: each rank trains on its shard of every epoch, and
// DDP averages the gradients across ranks during backward.
//
//   bazel build -c opt //examples:ddp
//   mpirun -np 2 --oversubscribe --allow-run-as-root bazel-bin/examples/ddp --steps=20
#include <cstdio>

#include "examples/net.h"

using namespace tessera;

int train(int64_t steps, const std::shared_ptr<dist::ProcessGroup>& world) {
  manual_seed(0);  // the same initial model everywhere (DDP broadcasts rank 0's anyway)
  auto model = std::make_shared<example::Net>();
  dist::DistributedDataParallel ddp(model, world);
  optim::SGD opt(model->parameters(), optim::SGDOptions(0.05).momentum(0.9).weight_decay(5e-4));

  auto train = std::make_shared<data::FashionMNISTDataset>("train");
  auto test = std::make_shared<data::FashionMNISTDataset>("test");
  // Each rank visits its own shard of every epoch; the test set is split once, unpadded.
  const int r = world->rank(), n = world->size();
  data::DataLoader train_loader(train, data::DataLoaderOptions(64),
                                std::make_shared<data::DistributedSampler>(
                                    train->size(), data::DistributedSamplerOptions(n, r).seed(0)));
  data::DataLoader test_loader(test, data::DataLoaderOptions(1000),
                               std::make_shared<data::DistributedSampler>(
                                   test->size(),
                                   data::DistributedSamplerOptions(n, r).shuffle(false).pad(false)));

  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    int64_t step = 0;
    for (data::Batch& b : train_loader.epoch(epoch)) {
      Variable loss = cross_entropy(ddp(b.inputs), b.targets);
      opt.zero_grad();
      loss.backward();  // gradients are averaged across ranks when this returns
      opt.step();
      ++step;
      const double mean_loss = dist::all_reduce_scalar(loss.item(), *world, dist::ReduceOp::kMean);
      if (world->rank() == 0 && step % 100 == 0) {
        std::printf("epoch %lld step %lld loss %.4f\n", (long long)epoch, (long long)step, mean_loss);
      }
      if (step == steps) break;
    }
  }

  // BatchNorm statistics: every rank takes rank 0's before evaluating and saving.
  dist::sync_buffers(*model, *world);
  NoGradGuard no_grad;
  model->eval();
  int64_t correct = 0;
  for (data::Batch& b : test_loader.epoch(0)) {
    correct += nn::num_correct((*model)(b.inputs), b.targets);
  }
  const double total = dist::all_reduce_scalar(static_cast<double>(correct), *world);
  if (world->rank() == 0) {
    std::printf("%d ranks: test accuracy %.4f\n", world->size(), total / test->size());
    nn::save_weights(*model, "/tmp/ddp_example.safetensors");
  }
  return 0;
}

int main(int argc, char** argv) {
  const int64_t steps = example::steps_flag(argc, argv);
  auto world = dist::init(&argc, &argv);
  // An exception on any rank ends every rank (none waits forever in a collective).
  return dist::run_or_abort([&] { return train(steps, world); });
}
