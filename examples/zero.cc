// The same training with ZeRO stage 2: no DDP wrapper; the optimizer shards its state and the
// gradients across ranks (each rank keeps 1/N of both) and reduces the gradients itself.
//
//   bazel build -c opt //examples:zero
//   mpirun -np 2 --oversubscribe --allow-run-as-root bazel-bin/examples/zero --steps=20
#include <cstdio>

#include "examples/net.h"

using namespace tessera;

int train(int64_t steps, const std::shared_ptr<dist::ProcessGroup>& world) {
  manual_seed(0);
  auto model = std::make_shared<example::Net>();
  // The inner optimizer steps this rank's shard; the constructor takes rank 0's parameters.
  dist::ZeroRedundancyOptimizer opt(
      model->parameters(), world,
      dist::zero_factory<optim::AdamW>(optim::AdamWOptions(2e-3).weight_decay(1e-2)),
      dist::ZeroOptions().stage(2));
  optim::CosineAnnealingLR schedule(opt, /*t_max=*/2);  // any optimizer: ZeRO is one too

  auto train = std::make_shared<data::FashionMNISTDataset>("train");
  const int r = world->rank(), n = world->size();
  data::DataLoader loader(train, data::DataLoaderOptions(64),
                          std::make_shared<data::DistributedSampler>(
                              train->size(), data::DistributedSamplerOptions(n, r).seed(0)));
  double loss_value = 0;
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    int64_t step = 0;
    for (data::Batch& b : loader.epoch(epoch)) {
      Variable loss = cross_entropy((*model)(b.inputs), b.targets);
      opt.zero_grad();
      loss.backward();             // gradient buckets are reduce-scattered as they fill
      opt.clip_grad_norm(5.0);     // the norm of the whole gradient, reduced across shards
      opt.step();                  // step the shard, all-gather the parameters
      loss_value = dist::all_reduce_scalar(loss.item(), *world, dist::ReduceOp::kMean);
      ++step;
      if (r == 0 && step % 100 == 0) {
        std::printf("epoch %lld step %lld loss %.4f\n", (long long)epoch, (long long)step, loss_value);
      }
      if (step == steps) break;
    }
    schedule.step();
  }
  dist::sync_buffers(*model, *world);
  // Every rank writes its own shard of the parameters and of the optimizer state, in parallel,
  // and rank 0 an index; load_sharded_checkpoint reads them back on any number of ranks.
  dist::zero::save_sharded_checkpoint("/tmp/zero_example_sharded", *model, opt,
                                      {/*epoch=*/2, /*step=*/0, default_generator().state()});
  const StateDict optimizer_state = opt.state_dict();  // collective: the full state, unsharded
  if (r == 0) {
    std::printf("%d ranks: last loss %.4f; optimizer state on this rank %lld bytes\n", n,
                loss_value, static_cast<long long>(opt.state_bytes()));
    save_checkpoint("/tmp/zero_example.safetensors", model->state_dict(), &optimizer_state,
                    {/*epoch=*/2, /*step=*/0, default_generator().state()});
  }
  return 0;
}

int main(int argc, char** argv) {
  const int64_t steps = example::steps_flag(argc, argv);
  auto world = dist::init(&argc, &argv);
  return dist::run_or_abort([&] { return train(steps, world); });
}
