// Learning-rate schedules, as torch.optim.lr_scheduler, stepped once per epoch (or per
// iteration, if that is how you count): after construction each group's lr is the schedule's
// value at epoch 0, and every step() moves one epoch on. The formulas are closed forms of the
// epoch, so resuming from a checkpoint only needs the epoch (set_epoch).
#pragma once

#include <memory>
#include <vector>

#include "optim/optimizer.h"

namespace tessera {
namespace optim {

class LRScheduler {
 public:
  explicit LRScheduler(Optimizer& optimizer);
  virtual ~LRScheduler() = default;
  void step();
  void set_epoch(int64_t epoch);
  int64_t epoch() const { return epoch_; }
  std::vector<double> get_last_lr() const;
  // The learning rate at `epoch` for a group whose initial lr is base_lr.
  virtual double lr_at(int64_t epoch, double base_lr) const = 0;

 protected:
  void apply();

 private:
  Optimizer& optimizer_;
  std::vector<double> base_lrs_;
  int64_t epoch_ = 0;
};

// lr = base * gamma^floor(epoch / step_size)
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);
  double lr_at(int64_t epoch, double base_lr) const override;

 private:
  int64_t step_size_;
  double gamma_;
};

// lr = base * gamma^(number of milestones <= epoch)
class MultiStepLR : public LRScheduler {
 public:
  MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma = 0.1);
  double lr_at(int64_t epoch, double base_lr) const override;

 private:
  std::vector<int64_t> milestones_;
  double gamma_;
};

// lr = eta_min + (base - eta_min) (1 + cos(pi epoch / T_max)) / 2
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t t_max, double eta_min = 0);
  double lr_at(int64_t epoch, double base_lr) const override;

 private:
  int64_t t_max_;
  double eta_min_;
};

// Linear warm-up from start_factor * base to base over `warmup` epochs, then `after`'s
// schedule (shifted by the warm-up), or the constant base if none.
class LinearWarmupLR : public LRScheduler {
 public:
  LinearWarmupLR(Optimizer& optimizer, int64_t warmup, double start_factor = 0.1,
                 std::shared_ptr<LRScheduler> after = nullptr);
  double lr_at(int64_t epoch, double base_lr) const override;

 private:
  int64_t warmup_;
  double start_factor_;
  std::shared_ptr<LRScheduler> after_;
};

}  // namespace optim
}  // namespace tessera
