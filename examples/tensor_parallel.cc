// Tensor parallelism inside data parallelism, TorchShard's recipe for a large classifier: the
// world is T = 2 tensor-parallel ranks x N/2 data-parallel replicas (dist::Topology). The
// classifier is column-parallel (each tensor-parallel rank holds half of its output features),
// its logits stay split by class, and ClassParallelCrossEntropy computes the loss without
// gathering them; DDP averages gradients over each data-parallel group. The two ranks of a
// tensor-parallel group read the same batch (the sampler is keyed by replica).
//
//   bazel build -c opt //examples:tensor_parallel
//   mpirun -np 2 --oversubscribe --allow-run-as-root bazel-bin/examples/tensor_parallel --steps=20
//
// At the end the model's state_dict() (full weights, gathered) loads into the same network
// without tensor parallelism, which must predict exactly what the parallel one does.
#include <cstdio>

#include "examples/net.h"

using namespace tessera;
namespace tp = tessera::dist::tensor_parallel;

// The examples' small CNN as a Sequential, so that its classifier can be swapped.
std::shared_ptr<nn::Sequential> make_net() {
  manual_seed(0);  // the same full weights whether the classifier is split or not
  return std::make_shared<nn::Sequential>(
      nn::Conv2d(nn::Conv2dOptions(1, 16, 3).padding(1)), nn::BatchNorm2d(16), nn::ReLU(),
      nn::MaxPool2d(nn::Pool2dOptions(2)), nn::Conv2d(nn::Conv2dOptions(16, 32, 3).padding(1)),
      nn::ReLU(), nn::MaxPool2d(nn::Pool2dOptions(2)), nn::Flatten(), nn::Linear(32 * 7 * 7, 10));
}

int train(int64_t steps, const std::shared_ptr<dist::ProcessGroup>& world) {
  TS_CHECK(world->size() % 2 == 0, "tensor_parallel example: run it on an even number of ranks "
           "(2 tensor-parallel ranks per replica), not ", world->size());
  dist::Topology topology(world, /*pipeline_stages=*/1, /*tensor_parallel_size=*/2);
  const auto& tp_group = topology.tensor_parallel_group();

  auto model = make_net();
  // The classifier (the last Linear) split by class, with the loss over its split logits.
  tp::ClassParallelHead head = tp::parallelize_classifier(*model, tp_group);
  dist::DistributedDataParallel ddp(model, topology.data_parallel_group());
  optim::SGD opt(model->parameters(), optim::SGDOptions(0.05).momentum(0.9));

  auto train_set = std::make_shared<data::FashionMNISTDataset>("train");
  const int d = topology.replica(), replicas = topology.data_parallel_size();
  data::DataLoader loader(train_set, data::DataLoaderOptions(64),
                          std::make_shared<data::DistributedSampler>(
                              train_set->size(),
                              data::DistributedSamplerOptions(replicas, d).seed(0)));
  int64_t step = 0;
  for (data::Batch& b : loader.epoch(0)) {
    Variable loss = head.loss(ddp(b.inputs), b.targets);
    opt.zero_grad();
    loss.backward();  // the head's gradient is local; the features' is summed over the TP group
    opt.step();
    ++step;
    if (world->rank() == 0 && step % 100 == 0) {
      std::printf("step %lld loss %.4f\n", (long long)step, loss.item());
    }
    if (step == steps) break;
  }

  // The checkpoint holds full weights under the ordinary names: a plain network takes them.
  dist::sync_buffers(*model, *topology.data_parallel_group());
  const StateDict state = model->state_dict();  // collective over the tensor-parallel group
  auto plain = make_net();
  plain->load_state_dict(state);
  NoGradGuard no_grad;
  model->eval();
  plain->eval();
  auto test_set = std::make_shared<data::FashionMNISTDataset>("test");
  data::DataLoader test_loader(test_set, data::DataLoaderOptions(1000));
  int64_t correct = 0, total = 0, disagreements = 0;
  for (data::Batch& b : test_loader.epoch(0)) {
    const Tensor classes = head.loss.argmax((*model)(b.inputs));
    const Tensor plain_classes = argmax((*plain)(b.inputs).data(), 1);
    disagreements += static_cast<int64_t>(sum(ne(classes, plain_classes)).item());
    correct += static_cast<int64_t>(sum(eq(classes, b.targets)).item());
    total += b.size();
  }
  if (world->rank() == 0) {
    std::printf("%d ranks (2 tensor-parallel x %d data-parallel): test accuracy %.4f; the head "
                "holds %lld of 10 classes on this rank; the plain network disagrees on %lld "
                "images\n",
                world->size(), replicas, static_cast<double>(correct) / total,
                static_cast<long long>(head.linear->output_slice().length),
                static_cast<long long>(disagreements));
  }
  TS_CHECK(disagreements == 0, "the tensor-parallel and the plain network disagree on ",
           disagreements, " test images");
  return 0;
}

int main(int argc, char** argv) {
  const int64_t steps = example::steps_flag(argc, argv);
  auto world = dist::init(&argc, &argv);
  return dist::run_or_abort([&] { return train(steps, world); });
}
