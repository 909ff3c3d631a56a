// Mixed precision, PyTorch's AMP recipe in C++: the forward under autocast (convolutions and
// matmuls in f16, losses and reductions in f32), the loss scaled so small f16 gradients do not
// flush to zero, the gradients unscaled before clipping, and a step skipped when a gradient
// overflowed (the scale then backs off).
//
//   bazel run -c opt //examples:amp -- --steps=20
#include <cstdio>

#include "examples/net.h"

using namespace tessera;

int main(int argc, char** argv) {
  const int64_t steps = example::steps_flag(argc, argv);
  manual_seed(0);
  auto model = std::make_shared<example::Net>();  // parameters stay f32 (the master weights)
  optim::SGD opt(model->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  optim::GradScaler scaler;  // init_scale 2^16, growth 2 every 2000 clean steps, backoff 0.5

  auto train = std::make_shared<data::FashionMNISTDataset>("train");
  data::DataLoader loader(train, data::DataLoaderOptions(64).shuffle(true).seed(0));
  int64_t step = 0, skipped = 0;
  double loss_value = 0;
  for (data::Batch& b : loader.epoch(0)) {
    Variable loss;
    {
      AutocastGuard autocast(kF16);
      loss = cross_entropy((*model)(b.inputs), b.targets);  // f32 (a loss)
    }
    opt.zero_grad();
    scaler.scale(loss).backward();  // gradients of loss * scale
    scaler.unscale_(opt);           // true gradients from here on
    optim::clip_grad_norm(model->parameters(), 5.0);
    if (!scaler.step(opt)) ++skipped;  // skipped when some gradient is inf or NaN
    scaler.update();
    loss_value = loss.item();
    if (++step % 100 == 0) {
      std::printf("step %lld loss %.4f scale %g\n", (long long)step, loss_value, scaler.get_scale());
    }
    if (step == steps) break;
  }
  std::printf("%lld steps, last loss %.4f, loss scale %g, %lld skipped\n", (long long)step,
              loss_value, scaler.get_scale(), (long long)skipped);
  return loss_value < 2.0 ? 0 : 1;  // learned something (chance is ln 10 = 2.30)
}
