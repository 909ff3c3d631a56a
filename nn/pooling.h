// Pooling layers over NCHW input. The stride defaults to the kernel size, as in PyTorch.
#pragma once

#include <array>

#include "nn/module.h"
#include "tensor/conv_params.h"

namespace tessera {
namespace nn {

class Pool2dOptions {
 public:
  explicit Pool2dOptions(int64_t kernel_size) {
    params_.kernel = {kernel_size, kernel_size};
    params_.stride = params_.kernel;
  }
  Pool2dOptions& stride(int64_t s) { params_.stride = {s, s}; return *this; }
  Pool2dOptions& padding(int64_t p) { params_.padding = {p, p}; return *this; }
  Pool2dOptions& count_include_pad(bool c) { params_.count_include_pad = c; return *this; }
  const Pool2dParams& params() const { return params_; }

 private:
  Pool2dParams params_;
};

class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(const Pool2dOptions& options) : options_(options) {}
  std::string type_name() const override { return "MaxPool2d"; }
  std::string extra_repr() const override;
  Variable forward(const Variable& x) override;

 private:
  Pool2dOptions options_;
};

class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(const Pool2dOptions& options) : options_(options) {}
  std::string type_name() const override { return "AvgPool2d"; }
  std::string extra_repr() const override;
  Variable forward(const Variable& x) override;

 private:
  Pool2dOptions options_;
};

class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(std::array<int64_t, 2> output_size) : output_size_(output_size) {}
  explicit AdaptiveAvgPool2d(int64_t output_size) : output_size_{output_size, output_size} {}
  std::string type_name() const override { return "AdaptiveAvgPool2d"; }
  std::string extra_repr() const override;
  Variable forward(const Variable& x) override;

 private:
  std::array<int64_t, 2> output_size_;
};

}  // namespace nn
}  // namespace tessera
