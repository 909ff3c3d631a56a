// Train a module of your own on Fashion-MNIST, evaluate it, save the weights and load them back.
//
//   bazel run -c opt //examples:custom_module              (two epochs: ~0.89 test accuracy)
//   bazel run -c opt //examples:custom_module -- --steps=20
#include <cstdio>

#include "examples/net.h"

using namespace tessera;

int main(int argc, char** argv) {
  const int64_t steps = example::steps_flag(argc, argv);
  manual_seed(0);
  auto model = std::make_shared<example::Net>();
  optim::SGD opt(model->parameters(), optim::SGDOptions(0.05).momentum(0.9).weight_decay(5e-4));

  auto train = std::make_shared<data::FashionMNISTDataset>("train");
  auto test = std::make_shared<data::FashionMNISTDataset>("test");
  data::DataLoader train_loader(train, data::DataLoaderOptions(64).shuffle(true).seed(0),
                                data::transforms::random_horizontal_flip(0.5));
  data::DataLoader test_loader(test, data::DataLoaderOptions(1000));

  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    model->train();
    int64_t step = 0;
    for (data::Batch& b : train_loader.epoch(epoch)) {
      Variable loss = cross_entropy((*model)(b.inputs), b.targets);
      opt.zero_grad();
      loss.backward();
      opt.step();
      if (++step % 100 == 0) {
        std::printf("epoch %lld step %lld loss %.4f\n", (long long)epoch, (long long)step, loss.item());
      }
      if (step == steps) break;
    }
  }

  auto evaluate = [&](nn::Module& m) {
    NoGradGuard no_grad;
    m.eval();
    int64_t correct = 0;
    for (data::Batch& b : test_loader.epoch(0)) {
      correct += nn::num_correct(m(b.inputs), b.targets);
    }
    return static_cast<double>(correct) / test->size();
  };
  const double accuracy = evaluate(*model);
  nn::save_weights(*model, "/tmp/custom_module.safetensors");
  auto reloaded = std::make_shared<example::Net>();
  nn::load_weights(*reloaded, "/tmp/custom_module.safetensors");
  const double reloaded_accuracy = evaluate(*reloaded);
  std::printf("test accuracy %.4f, after reloading the weights %.4f\n", accuracy, reloaded_accuracy);
  return accuracy == reloaded_accuracy ? 0 : 1;
}
