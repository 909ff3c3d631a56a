// SGD with momentum, dampening, Nesterov and L2 weight decay, exactly as torch.optim.SGD:
//   d = g + wd p;  b = momentum b + (1 - dampening) d  (b = d on the first step);
//   d = nesterov ? d + momentum b : b;  p -= lr d
//   SGD(model->parameters(), SGDOptions(0.1).momentum(0.9).weight_decay(1e-4))
#pragma once

#include "optim/elementwise_optimizer.h"

namespace tessera {
namespace optim {

class SGDOptions : public OptimizerOptions {
 public:
  explicit SGDOptions(double lr) : lr_(lr) {}
  SGDOptions& momentum(double m) { momentum_ = m; return *this; }
  SGDOptions& dampening(double d) { dampening_ = d; return *this; }
  SGDOptions& weight_decay(double w) { weight_decay_ = w; return *this; }
  SGDOptions& nesterov(bool n) { nesterov_ = n; return *this; }
  double momentum() const { return momentum_; }
  double dampening() const { return dampening_; }
  double weight_decay() const { return weight_decay_; }
  bool nesterov() const { return nesterov_; }

  double lr() const override { return lr_; }
  void set_lr(double lr) override { lr_ = lr; }
  std::unique_ptr<OptimizerOptions> clone() const override;
  std::vector<std::pair<std::string, double>> values() const override;
  void set(const std::string& name, double value) override;
  // Throws when the combination is invalid, naming the values.
  void validate() const;

 private:
  double lr_, momentum_ = 0, dampening_ = 0, weight_decay_ = 0;
  bool nesterov_ = false;
};

class SGD : public ElementwiseOptimizer {
 public:
  SGD(std::vector<Variable> params, const SGDOptions& options);
  SGD(std::vector<ParamGroup> groups, const SGDOptions& defaults);

 protected:
  void update_group(const OptimizerOptions& options, std::vector<PendingUpdate>& updates) override;
  void update(const OptimizerOptions& options, ParamState& state, const Tensor& param,
              const Tensor& grad) override;
};

}  // namespace optim
}  // namespace tessera
