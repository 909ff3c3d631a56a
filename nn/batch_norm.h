// BatchNorm2d (Ioffe and Szegedy): normalizes each channel of NCHW input with the batch's
// statistics in training (updating running_mean/running_var with `momentum`) and with the
// running statistics in eval. Buffers as PyTorch's: running_mean, running_var,
// num_batches_tracked. forward_relu and BNReLU2d fuse the ReLU (and a residual block's
// addition) that follows it into its pass over the activation.
#pragma once

#include "nn/module.h"

namespace tessera {
namespace nn {

class BatchNorm2dOptions {
 public:
  explicit BatchNorm2dOptions(int64_t num_features) : num_features_(num_features) {}
  BatchNorm2dOptions& eps(double e) { eps_ = e; return *this; }
  BatchNorm2dOptions& momentum(double m) { momentum_ = m; return *this; }
  BatchNorm2dOptions& affine(bool a) { affine_ = a; return *this; }
  BatchNorm2dOptions& track_running_stats(bool t) { track_ = t; return *this; }

  int64_t num_features() const { return num_features_; }
  double eps() const { return eps_; }
  double momentum() const { return momentum_; }
  bool affine() const { return affine_; }
  bool track_running_stats() const { return track_; }

 private:
  int64_t num_features_;
  double eps_ = 1e-5, momentum_ = 0.1;
  bool affine_ = true, track_ = true;
};

class BatchNorm2d : public Module {
 public:
  explicit BatchNorm2d(const BatchNorm2dOptions& options);
  explicit BatchNorm2d(int64_t num_features) : BatchNorm2d(BatchNorm2dOptions(num_features)) {}
  std::string type_name() const override { return "BatchNorm2d"; }
  std::string extra_repr() const override;
  Variable forward(const Variable& x) override;
  // relu(forward(x) + residual) in one fused op (autograd's batch_norm_relu), the tail of a
  // residual block; residual may be undefined: relu(forward(x)). Statistics, running
  // statistics, eval mode and deferral as forward's. Runs the forward hooks as (*bn)(x) does
  // (they see the ReLU's output), so a block calls it in place of (*bn)(x).
  Variable forward_relu(const Variable& x, const Variable& residual = Variable());

  const Variable& weight() const { return weight_; }
  const Variable& bias() const { return bias_; }
  const Variable& running_mean() const { return running_mean_; }
  const Variable& running_var() const { return running_var_; }
  const BatchNorm2dOptions& options() const { return options_; }

  // Deferred running statistics (torchgpipe's DeferredBatchNorm). While on, a training forward
  // still normalizes with its own input's statistics, but leaves the running statistics alone
  // and adds its per-channel sums to an accumulator; commit_running_statistics() then updates
  // the running statistics once, as one forward over all the accumulated inputs would have
  // (their mean and unbiased variance). A pipeline turns this on so that the M micro-batches of
  // a batch update the statistics once, as the unpipelined batch does, rather than M times.
  // Forwards run again inside a backward (activation checkpointing's recomputation) are not
  // counted.
  void defer_running_statistics(bool on);
  bool defers_running_statistics() const { return deferred_; }
  void commit_running_statistics();

  // model->to(kF16 / kBF16) leaves BatchNorm in f32 (Module::to).
  bool keep_f32_under_half() const override { return true; }

 protected:
  // forward (relu = false) and forward_relu, without the hooks.
  Variable normalize(const Variable& x, bool relu, const Variable& residual);

 private:
  BatchNorm2dOptions options_;
  Variable weight_, bias_, running_mean_, running_var_, num_batches_tracked_;
  bool deferred_ = false;
  Tensor sum_, sum_of_squares_;  // f64 [C], deferred mode's accumulator
  int64_t count_ = 0;            // values per channel accumulated
};

// BatchNorm2d followed by ReLU as one layer (PyTorch's fused BNReLU2d): forward is
// forward_relu(x), for a Sequential such as a ResNet's stem. Its parameters, buffers and state
// dict entries are BatchNorm2d's.
class BNReLU2d : public BatchNorm2d {
 public:
  using BatchNorm2d::BatchNorm2d;
  std::string type_name() const override { return "BNReLU2d"; }
  Variable forward(const Variable& x) override { return normalize(x, true, Variable()); }
};

}  // namespace nn
}  // namespace tessera
