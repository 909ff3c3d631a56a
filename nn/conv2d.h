// Conv2d: 2-D convolution over [N, C, H, W] input (NCHW, or channels-last NHWC storage: see
// Conv2dOptions::channels_last), weight [out, in/groups, kh, kw].
//   Conv2d(Conv2dOptions(16, 32, 3).stride(2).padding(1).bias(false))
// Initialized as PyTorch's Conv2d (kaiming-uniform with a = sqrt(5); bias U(+-1/sqrt(fan_in))).
#pragma once

#include <array>

#include "nn/module.h"
#include "tensor/conv_params.h"

namespace tessera {
namespace nn {

class Conv2dOptions {
 public:
  Conv2dOptions(int64_t in_channels, int64_t out_channels, int64_t kernel_size)
      : in_(in_channels), out_(out_channels), kernel_{kernel_size, kernel_size} {}
  Conv2dOptions& kernel_size(std::array<int64_t, 2> k) { kernel_ = k; return *this; }
  Conv2dOptions& stride(int64_t s) { params_.stride = {s, s}; return *this; }
  Conv2dOptions& padding(int64_t p) { params_.padding = {p, p}; return *this; }
  Conv2dOptions& dilation(int64_t d) { params_.dilation = {d, d}; return *this; }
  Conv2dOptions& groups(int64_t g) { params_.groups = g; return *this; }
  Conv2dOptions& bias(bool b) { bias_ = b; return *this; }
  // Channels-last activations where the backend has such kernels (Conv2dParams::channels_last;
  // Module::to(MemoryFormat::kChannelsLast) sets it on every Conv2d of a model).
  Conv2dOptions& channels_last(bool on) { params_.channels_last = on; return *this; }
  // Channels-blocked (nChw16c) activations where the backend has such kernels
  // (Conv2dParams::channels_blocked; Module::to(MemoryFormat::kChannelsBlocked) sets it).
  Conv2dOptions& channels_blocked(bool on) { params_.channels_blocked = on; return *this; }

  int64_t in_channels() const { return in_; }
  int64_t out_channels() const { return out_; }
  std::array<int64_t, 2> kernel_size() const { return kernel_; }
  const Conv2dParams& params() const { return params_; }
  bool bias() const { return bias_; }

 private:
  int64_t in_, out_;
  std::array<int64_t, 2> kernel_;
  Conv2dParams params_;
  bool bias_ = true;
};

class Conv2d : public Module {
 public:
  explicit Conv2d(const Conv2dOptions& options);
  std::string type_name() const override { return "Conv2d"; }
  std::string extra_repr() const override;
  Variable forward(const Variable& x) override;
  void reset_parameters();
  void set_memory_format(MemoryFormat format) override {
    options_.channels_last(format == MemoryFormat::kChannelsLast);
    options_.channels_blocked(format == MemoryFormat::kChannelsBlocked);
  }

  const Variable& weight() const { return weight_; }
  const Variable& bias() const { return bias_; }
  const Conv2dOptions& options() const { return options_; }

 private:
  Conv2dOptions options_;
  Variable weight_, bias_;
};

}  // namespace nn
}  // namespace tessera
