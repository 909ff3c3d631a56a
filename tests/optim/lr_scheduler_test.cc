// LR schedules against their closed forms, epoch by epoch.
#include "optim/lr_scheduler.h"

#include <gtest/gtest.h>

#include <cmath>

#include "optim/sgd.h"
#include "tensor/ops.h"

namespace tessera {
namespace optim {
namespace {

struct Fixture {
  Variable p{ones({1}), true};
  SGD opt{{p}, SGDOptions(0.1)};
  double lr() const { return opt.param_groups()[0].options->lr(); }
};

TEST(LRScheduler, StepLR) {
  Fixture f;
  StepLR s(f.opt, 3, 0.5);
  const std::vector<double> want = {0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025};
  for (double w : want) {
    EXPECT_NEAR(f.lr(), w, 1e-15);
    s.step();
  }
}

TEST(LRScheduler, MultiStepLR) {
  Fixture f;
  MultiStepLR s(f.opt, {2, 4}, 0.1);
  const std::vector<double> want = {0.1, 0.1, 0.01, 0.01, 0.001, 0.001};
  for (double w : want) {
    EXPECT_NEAR(f.lr(), w, 1e-15);
    s.step();
  }
}

TEST(LRScheduler, CosineAnnealing) {
  Fixture f;
  CosineAnnealingLR s(f.opt, 4, 0.01);
  for (int e = 0; e <= 6; ++e) {
    const double want = 0.01 + 0.09 * (1 + std::cos(M_PI * std::min(e, 4) / 4.0)) / 2;
    EXPECT_NEAR(f.lr(), want, 1e-15) << e;
    s.step();
  }
}

TEST(LRScheduler, LinearWarmupThenCosine) {
  Fixture f;
  auto cosine = std::make_shared<CosineAnnealingLR>(f.opt, 10);
  LinearWarmupLR s(f.opt, 2, 0.1, cosine);
  EXPECT_NEAR(f.lr(), 0.01, 1e-15);
  s.step();
  EXPECT_NEAR(f.lr(), 0.1 * (0.1 + 0.9 * 0.5), 1e-15);
  s.step();
  EXPECT_NEAR(f.lr(), 0.1, 1e-15);  // cosine at its epoch 0
  s.step();
  EXPECT_NEAR(f.lr(), 0.1 * (1 + std::cos(M_PI / 10)) / 2, 1e-15);
  s.set_epoch(12);
  EXPECT_NEAR(f.lr(), 0.0, 1e-15);
}

TEST(LRScheduler, BadArgumentsAreErrors) {
  Fixture f;
  EXPECT_THROW(StepLR(f.opt, 0), Error);
  EXPECT_THROW(MultiStepLR(f.opt, {3, 1}), Error);
  EXPECT_THROW(CosineAnnealingLR(f.opt, 0), Error);
}

}  // namespace
}  // namespace optim
}  // namespace tessera
