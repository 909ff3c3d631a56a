// Adam (Kingma and Ba) and AdamW (Loshchilov and Hutter: decoupled weight decay), exactly as
// torch.optim.Adam / AdamW, with amsgrad:
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;  (amsgrad: v = max(v_max, v))
//   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// Adam adds wd p to g; AdamW multiplies p by (1 - lr wd) first.
#pragma once

#include "optim/elementwise_optimizer.h"

namespace tessera {
namespace optim {

class AdamOptions : public OptimizerOptions {
 public:
  explicit AdamOptions(double lr = 1e-3) : lr_(lr) {}
  AdamOptions& betas(std::pair<double, double> b) { beta1_ = b.first; beta2_ = b.second; return *this; }
  AdamOptions& eps(double e) { eps_ = e; return *this; }
  AdamOptions& weight_decay(double w) { weight_decay_ = w; return *this; }
  AdamOptions& amsgrad(bool a) { amsgrad_ = a; return *this; }
  std::pair<double, double> betas() const { return {beta1_, beta2_}; }
  double eps() const { return eps_; }
  double weight_decay() const { return weight_decay_; }
  bool amsgrad() const { return amsgrad_; }

  double lr() const override { return lr_; }
  void set_lr(double lr) override { lr_ = lr; }
  std::unique_ptr<OptimizerOptions> clone() const override;
  std::vector<std::pair<std::string, double>> values() const override;
  void set(const std::string& name, double value) override;
  void validate() const;

 private:
  double lr_, beta1_ = 0.9, beta2_ = 0.999, eps_ = 1e-8, weight_decay_ = 0;
  bool amsgrad_ = false;
};

// AdamW's options are Adam's with weight_decay 1e-2 by default.
class AdamWOptions : public AdamOptions {
 public:
  explicit AdamWOptions(double lr = 1e-3) : AdamOptions(lr) { weight_decay(1e-2); }
};

class Adam : public ElementwiseOptimizer {
 public:
  Adam(std::vector<Variable> params, const AdamOptions& options);
  Adam(std::vector<ParamGroup> groups, const AdamOptions& defaults);

 protected:
  Adam(std::vector<ParamGroup> groups, const AdamOptions& defaults, bool decoupled);
  void update_group(const OptimizerOptions& options, std::vector<PendingUpdate>& updates) override;
  void update(const OptimizerOptions& options, ParamState& state, const Tensor& param,
              const Tensor& grad) override;

 private:
  bool decoupled_;
};

class AdamW : public Adam {
 public:
  // AdamWOptions gives AdamW's default weight decay; setters return AdamOptions, accepted too.
  AdamW(std::vector<Variable> params, const AdamOptions& options = AdamWOptions());
  AdamW(std::vector<ParamGroup> groups, const AdamOptions& defaults);
};

}  // namespace optim
}  // namespace tessera
