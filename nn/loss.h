// Loss modules over the functional losses of autograd/functions.h.
#pragma once

#include "autograd/functions.h"

namespace tessera {
namespace nn {

class CrossEntropyLoss {
 public:
  explicit CrossEntropyLoss(Reduction reduction = Reduction::kMean, double label_smoothing = 0.0);
  Variable operator()(const Variable& logits, const Tensor& target) const {
    return cross_entropy(logits, target, reduction_, label_smoothing_);
  }

 private:
  Reduction reduction_;
  double label_smoothing_;
};

class NLLLoss {
 public:
  explicit NLLLoss(Reduction reduction = Reduction::kMean) : reduction_(reduction) {}
  Variable operator()(const Variable& log_probs, const Tensor& target) const {
    return nll_loss(log_probs, target, reduction_);
  }

 private:
  Reduction reduction_;
};

class MSELoss {
 public:
  explicit MSELoss(Reduction reduction = Reduction::kMean) : reduction_(reduction) {}
  Variable operator()(const Variable& input, const Variable& target) const {
    return mse_loss(input, target, reduction_);
  }
  // A target as data (a batch's): the form a pipeline's loss function takes.
  Variable operator()(const Variable& input, const Tensor& target) const {
    return mse_loss(input, Variable(target), reduction_);
  }

 private:
  Reduction reduction_;
};

}  // namespace nn
}  // namespace tessera
