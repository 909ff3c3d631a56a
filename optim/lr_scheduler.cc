#include "optim/lr_scheduler.h"

#include <algorithm>
#include <cmath>

namespace tessera {
namespace optim {

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer) {
  for (const ParamGroup& g : optimizer.param_groups()) base_lrs_.push_back(g.options->lr());
}

void LRScheduler::apply() {
  auto& groups = optimizer_.param_groups();
  TS_CHECK(groups.size() == base_lrs_.size(), "LRScheduler: the optimizer had ",
           base_lrs_.size(), " groups when the scheduler was made, now ", groups.size());
  for (size_t i = 0; i < groups.size(); ++i) groups[i].options->set_lr(lr_at(epoch_, base_lrs_[i]));
}

void LRScheduler::step() {
  ++epoch_;
  apply();
}

void LRScheduler::set_epoch(int64_t epoch) {
  TS_CHECK(epoch >= 0, "LRScheduler::set_epoch: negative epoch ", epoch);
  epoch_ = epoch;
  apply();
}

std::vector<double> LRScheduler::get_last_lr() const {
  std::vector<double> out;
  for (const ParamGroup& g : optimizer_.param_groups()) out.push_back(g.options->lr());
  return out;
}

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  TS_CHECK(step_size > 0, "StepLR: step_size must be positive, got ", step_size);
  apply();
}

double StepLR::lr_at(int64_t epoch, double base_lr) const {
  return base_lr * std::pow(gamma_, static_cast<double>(epoch / step_size_));
}

MultiStepLR::MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma)
    : LRScheduler(optimizer), milestones_(std::move(milestones)), gamma_(gamma) {
  TS_CHECK(std::is_sorted(milestones_.begin(), milestones_.end()),
           "MultiStepLR: milestones must be increasing, got ", milestones_);
  apply();
}

double MultiStepLR::lr_at(int64_t epoch, double base_lr) const {
  const auto passed = std::upper_bound(milestones_.begin(), milestones_.end(), epoch) -
                      milestones_.begin();
  return base_lr * std::pow(gamma_, static_cast<double>(passed));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t t_max, double eta_min)
    : LRScheduler(optimizer), t_max_(t_max), eta_min_(eta_min) {
  TS_CHECK(t_max > 0, "CosineAnnealingLR: T_max must be positive, got ", t_max);
  apply();
}

double CosineAnnealingLR::lr_at(int64_t epoch, double base_lr) const {
  const double progress = std::min<double>(static_cast<double>(epoch), static_cast<double>(t_max_));
  return eta_min_ + (base_lr - eta_min_) * (1 + std::cos(M_PI * progress / t_max_)) / 2;
}

LinearWarmupLR::LinearWarmupLR(Optimizer& optimizer, int64_t warmup, double start_factor,
                               std::shared_ptr<LRScheduler> after)
    : LRScheduler(optimizer), warmup_(warmup), start_factor_(start_factor), after_(std::move(after)) {
  TS_CHECK(warmup >= 0, "LinearWarmupLR: warmup must be >= 0, got ", warmup);
  TS_CHECK(start_factor > 0 && start_factor <= 1,
           "LinearWarmupLR: start_factor must be in (0, 1], got ", start_factor);
  apply();
}

double LinearWarmupLR::lr_at(int64_t epoch, double base_lr) const {
  if (epoch < warmup_) {
    return base_lr * (start_factor_ + (1 - start_factor_) * static_cast<double>(epoch) / warmup_);
  }
  return after_ ? after_->lr_at(epoch - warmup_, base_lr) : base_lr;
}

}  // namespace optim
}  // namespace tessera
