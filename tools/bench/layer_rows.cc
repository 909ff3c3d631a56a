#include "tools/bench/layer_rows.h"

#include <algorithm>
#include <cstdio>
#include <memory>

#include "models/resnet.h"
#include "optim/sgd.h"
#include "tensor/ops.h"

namespace tessera {
namespace bench {
namespace {

// The least traffic of the memory-bound rows, in tensors the size of the activation x, as a
// pass of its own (not fused into a convolution's) must move it:
//   batch norm forward: the statistics read x; the apply reads x (and the residual) and
//     writes y;
//   backward: the sums read dy and x; the gradient pass reads them again and writes dx. A ReLU's
//     mask comes from x (y > 0 where x * scale + shift > 0). With a residual, the sums pass also
//     reads it and writes the residual's gradient (dy masked), which the gradient pass reads
//     instead of dy;
//   max pooling 3x3/2: x read and y (x / 4) written, dy (x / 4) read and dx written;
//   SGD with momentum: parameters, gradients and momenta read, parameters and momenta written.
constexpr double kBatchNormForward = 3, kBatchNormForwardResidual = 4;
constexpr double kBatchNormBackward = 5, kBatchNormBackwardResidual = 7;
constexpr double kMaxPool = 1.25, kSgdMomentum = 5;

double gigabytes(const Tensor& t) { return t.numel() * 4e-9; }  // f32

// An activation in the rows' memory format: channels-blocked takes whole blocks of 16 channels
// (the stem's RGB input stays NCHW, as in a model), channels-last any.
Tensor activation(const Tensor& t, MemoryFormat format) {
  if (format == MemoryFormat::kChannelsBlocked && t.size(1) % 16 != 0) return t;
  return t.contiguous(format);
}

void add_conv_rows(const Layers& layers, int64_t batch, MemoryFormat format,
                   std::vector<Row>* rows) {
  for (const auto& [s, count] : counted(layers.convs)) {
    Conv2dParams p;
    p.stride = {s.stride, s.stride};
    p.padding = {s.kernel / 2, s.kernel / 2};
    p.channels_last = format == MemoryFormat::kChannelsLast;
    p.channels_blocked = format == MemoryFormat::kChannelsBlocked;
    const Tensor x = activation(randn({batch, s.c, s.h, s.h}), format);
    const Tensor w = randn({s.k, s.c, s.kernel, s.kernel});
    const Tensor dy = activation(randn({batch, s.k, s.out(), s.out()}), format);
    const double gflop = 2.0 * batch * s.k * s.out() * s.out() * s.c * s.kernel * s.kernel * 1e-9;
    char name[96];
    std::snprintf(name, sizeof name, "conv %lldx%lld/%lld %4lld->%4lld %3lldx%-3lld",
                  (long long)s.kernel, (long long)s.kernel, (long long)s.stride, (long long)s.c,
                  (long long)s.k, (long long)s.h, (long long)s.h);
    rows->push_back({std::string(name) + " fwd", count, gflop, 0,
                     [=] { conv2d(x, w, Tensor(), p); }});
    if (s.c > 3) {  // the stem's input is the data: no input gradient
      rows->push_back({std::string(name) + " bwd-data", count, gflop, 0,
                       [=] { conv2d_backward_input(dy, w, x.shape(), p); }});
    }
    rows->push_back({std::string(name) + " bwd-weight", count, gflop, 0,
                     [=] { conv2d_backward_weight(dy, x, w.shape(), p); }});
  }
}

void add_batch_norm_rows(const Layers& layers, int64_t batch, MemoryFormat format,
                         std::vector<Row>* rows) {
  for (const auto& [s, count] : counted(layers.bns)) {
    const Tensor x = activation(randn({batch, s.c, s.h, s.h}), format);
    const Tensor g = activation(randn({batch, s.c, s.h, s.h}), format);
    const Tensor w = ones({s.c}), b = zeros({s.c}), rm = zeros({s.c}), rv = ones({s.c});
    const BatchNormResult r = batch_norm(x, w, b, rm, rv, true, 0.1, 1e-5);
    char name[96];
    std::snprintf(name, sizeof name, "batchnorm %4lld %3lldx%-3lld", (long long)s.c,
                  (long long)s.h, (long long)s.h);
    rows->push_back({std::string(name) + " fwd", count, 0, kBatchNormForward * gigabytes(x),
                     [=] { batch_norm(x, w, b, rm, rv, true, 0.1, 1e-5); }});
    rows->push_back({std::string(name) + " bwd", count, 0, kBatchNormBackward * gigabytes(x), [=] {
                       batch_norm_backward(g, x, w, r.mean, r.invstd, true, true, true);
                     }});
  }
}

void add_bn_relu_rows(const Layers& layers, int64_t batch, MemoryFormat format,
                      std::vector<Row>* rows) {
  for (const auto& [s, count] : counted(layers.bn_relus)) {
    const Tensor x = activation(randn({batch, s.c, s.h, s.h}), format);
    const Tensor g = activation(randn({batch, s.c, s.h, s.h}), format);
    const Tensor res = s.residual ? activation(randn({batch, s.c, s.h, s.h}), format) : Tensor();
    const Tensor w = ones({s.c}), b = zeros({s.c}), rm = zeros({s.c}), rv = ones({s.c});
    const BatchNormResult r = batch_norm_relu(x, w, b, res, rm, rv, true, 0.1, 1e-5);
    char name[96];
    std::snprintf(name, sizeof name, "%s %4lld %3lldx%-3lld",
                  s.residual ? "bn+add+relu" : "bn+relu", (long long)s.c, (long long)s.h,
                  (long long)s.h);
    const double forward = s.residual ? kBatchNormForwardResidual : kBatchNormForward;
    const double backward = s.residual ? kBatchNormBackwardResidual : kBatchNormBackward;
    rows->push_back({std::string(name) + " fwd", count, 0, forward * gigabytes(x),
                     [=] { batch_norm_relu(x, w, b, res, rm, rv, true, 0.1, 1e-5); }});
    rows->push_back({std::string(name) + " bwd", count, 0, backward * gigabytes(x), [=] {
                       batch_norm_relu_backward(g, r.output, x, w, r.mean, r.invstd, true, true,
                                                true, s.residual);
                     }});
  }
}

// The stem's 3x3/2 max pooling, the only one in the model.
void add_max_pool_rows(int64_t batch, MemoryFormat format, std::vector<Row>* rows) {
  const Tensor x = activation(randn({batch, 64, 112, 112}), format);
  Pool2dParams p;
  p.kernel = {3, 3};
  p.stride = {2, 2};
  p.padding = {1, 1};
  const auto [y, idx] = max_pool2d_with_indices(x, p);
  const Tensor g = activation(randn(y.shape()), format);
  rows->push_back({"maxpool 3x3/2 64 112x112 fwd", 1, 0, kMaxPool * gigabytes(x),
                   [=] { max_pool2d_with_indices(x, p); }});
  rows->push_back({"maxpool 3x3/2 64 112x112 bwd", 1, 0, kMaxPool * gigabytes(x),
                   [=, idx = idx] { max_pool2d_backward(g, idx, x.shape()); }});
}

// The optimizer: SGD with momentum over the real model's parameters, with gradients set.
void add_sgd_row(const std::string& model, std::vector<Row>* rows) {
  auto net = model == "resnet18" ? models::ResNet18(3, 1000) : models::ResNet50(3, 1000);
  auto opt = std::make_shared<optim::SGD>(net->parameters(), optim::SGDOptions(0.01).momentum(0.9));
  double parameters = 0;
  for (Variable& v : net->parameters()) {
    v.set_grad(randn(v.data().shape()));
    parameters += gigabytes(v.data());
  }
  rows->push_back({"sgd momentum, all parameters", 1, 0, kSgdMomentum * parameters,
                   [opt] { opt->step(); }});
}

}  // namespace

std::vector<Row> layer_rows(const Layers& layers, const std::string& model, int64_t batch,
                            MemoryFormat format) {
  std::vector<Row> rows;
  add_conv_rows(layers, batch, format, &rows);
  add_batch_norm_rows(layers, batch, format, &rows);
  add_bn_relu_rows(layers, batch, format, &rows);
  add_max_pool_rows(batch, format, &rows);
  add_sgd_row(model, &rows);
  return rows;
}

void keep_rows_named(const std::string& only, std::vector<Row>* rows) {
  if (only.empty()) return;
  rows->erase(std::remove_if(rows->begin(), rows->end(),
                             [&](const Row& r) { return r.name.find(only) == std::string::npos; }),
              rows->end());
}

}  // namespace bench
}  // namespace tessera
