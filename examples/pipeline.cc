// The same training with pipeline parallelism: the model is a Sequential cut into one stage
// per rank; each batch is split into micro-batches that flow through the stages on the 1F1B
// schedule. Every rank reads the same batches; the first stage uses the images, the last the
// labels.
//
//   bazel build -c opt //examples:pipeline
//   mpirun -np 2 --oversubscribe --allow-run-as-root bazel-bin/examples/pipeline --steps=20
#include <cstdio>

#include "examples/net.h"

using namespace tessera;

int train(int64_t steps, const std::shared_ptr<dist::ProcessGroup>& world) {
  manual_seed(0);  // the same full model on every rank; each trains its stage of it
  // example::Net's layers in a row, so the pipeline can cut between any two of them.
  auto model = std::make_shared<nn::Sequential>(
      nn::Conv2d(nn::Conv2dOptions(1, 16, 3).padding(1)), nn::BatchNorm2d(16), nn::ReLU(),
      nn::MaxPool2d(nn::Pool2dOptions(2)), nn::Conv2d(nn::Conv2dOptions(16, 32, 3).padding(1)),
      nn::ReLU(), nn::MaxPool2d(nn::Pool2dOptions(2)), nn::Flatten(), nn::Linear(32 * 7 * 7, 10));
  // Cut where forward + backward time splits evenly, profiled on one micro-batch of 16 images
  // (the convolutions hold few parameters but most of the work: "params" would misplace them).
  pipeline::Pipe pipe(model, world, nn::CrossEntropyLoss(),
      pipeline::PipeOptions().microbatches(4).schedule(pipeline::ScheduleKind::kOneFOneB)
          .balance(pipeline::Balance::kTime).sample(randn({16, 1, 28, 28})));
  optim::SGD opt(pipe.parameters(), optim::SGDOptions(0.05).momentum(0.9).weight_decay(5e-4));

  auto train = std::make_shared<data::FashionMNISTDataset>("train");
  auto test = std::make_shared<data::FashionMNISTDataset>("test");
  // The same shuffled batches on every rank (same seed): the stages share each batch.
  data::DataLoader train_loader(train, data::DataLoaderOptions(64).shuffle(true).seed(0));
  data::DataLoader test_loader(test, data::DataLoaderOptions(1000));

  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    int64_t step = 0;
    for (data::Batch& b : train_loader.epoch(epoch)) {
      opt.zero_grad();
      const double loss = pipe.train_step(b.inputs, b.targets);  // the batch loss, on every rank
      opt.step();
      ++step;
      if (world->rank() == 0 && step % 100 == 0) {
        std::printf("epoch %lld step %lld loss %.4f\n", (long long)epoch, (long long)step, loss);
      }
      if (step == steps) break;
    }
  }
  std::printf("balance %s; %s\n", pipeline::balance_spec(pipe.balance()).c_str(),
              pipe.bubble_report().c_str());

  // Evaluation runs the forward-only schedule; every rank gets the logits.
  model->eval();
  int64_t correct = 0;
  for (data::Batch& b : test_loader.epoch(0)) correct += nn::num_correct(pipe.forward(b.inputs), b.targets);
  // The trained stages gathered into the whole model on every rank: saved as any model is.
  pipe.gather_model();
  if (world->rank() == 0) {
    std::printf("%d stages: test accuracy %.4f\n", world->size(), double(correct) / test->size());
    nn::save_weights(*model, "/tmp/pipeline_example.safetensors");
  }
  return 0;
}

int main(int argc, char** argv) {
  const int64_t steps = example::steps_flag(argc, argv);
  auto world = dist::init(&argc, &argv);
  // An exception on any rank ends every rank (none waits forever for a stage's message).
  return dist::run_or_abort([&] { return train(steps, world); });
}
