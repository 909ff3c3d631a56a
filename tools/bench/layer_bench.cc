// Per-layer breakdown of an ImageNet-style ResNet training step (issue 15): where the time of
// `train_bench --models=resnet18` (or resnet50) goes, layer shape by layer shape.
//
//   bazel run -c opt --config=native //tools/bench:layer_bench -- --model=resnet50 [--batch=8
//       --threads=1,2 --reps=5 --only=conv --clock=cpu]
//
// The model's layers are listed from its architecture (models/resnet.cc: a 7x7/2 stem, 3x3/2
// max pooling, BasicBlocks or Bottlenecks with the stride on the 3x3 convolution and 1x1
// projections), each distinct shape once with the number of times the model runs it. Every
// convolution shape is timed in its three passes (forward, backward-data = input gradient,
// backward-weight), the rest (batch norm, batch norm fused with the ReLU and the residual add
// that follow it, max pooling, the SGD update of all parameters) as the step runs them, each at every thread count: median milliseconds of
// `reps` runs after a warm-up. The "x count" column is what the shape costs in one step, so the
// table read from its largest entries down is the order to optimize in. GFLOP/s stand beside
// the machine's peak, measured here by a loop of independent FMAs on 16-float vectors.
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "autograd/functions.h"
#include "models/resnet.h"
#include "tools/bench/bench_clock.h"
#include "optim/sgd.h"
#include "tensor/ops.h"
#include "tensor/parallel.h"

using namespace tessera;
using bench::cpu_clock;
using bench::now_ms;

namespace {

// One convolution shape: c -> k channels, kernel x kernel, stride, on an h x h input.
struct ConvShape {
  int64_t c, k, kernel, stride, h;
  int64_t out() const { return (h + 2 * (kernel / 2) - kernel) / stride + 1; }
  bool operator<(const ConvShape& o) const {
    return std::tie(c, k, kernel, stride, h) < std::tie(o.c, o.k, o.kernel, o.stride, o.h);
  }
};

// What one step runs besides convolutions, by shape: batch norm on [N, C, H, H], alone or
// fused with the ReLU after it (and the residual added before that ReLU).
struct MapShape {
  int64_t c, h;
  bool residual = false;
  bool operator<(const MapShape& o) const {
    return std::tie(c, h, residual) < std::tie(o.c, o.h, o.residual);
  }
};

struct Layers {
  std::vector<ConvShape> convs;  // in model order, with repeats
  std::vector<MapShape> bns;       // batch norm alone (the projection shortcuts')
  std::vector<MapShape> bn_relus;  // batch norm + ReLU (+ residual), one fused op
};

// The layers of models::ResNetImageNet(depth) on a 224 x 224 input.
Layers resnet_layers(int depth) {
  Layers l;
  // A convolution and the batch norm after it: alone, + ReLU, or + residual + ReLU.
  enum Tail { kBn, kBnRelu, kBnAddRelu };
  auto conv = [&](int64_t c, int64_t k, int64_t kernel, int64_t stride, int64_t h, Tail tail) {
    const ConvShape s{c, k, kernel, stride, h};
    l.convs.push_back(s);
    if (tail == kBn) l.bns.push_back({k, s.out()});
    else l.bn_relus.push_back({k, s.out(), tail == kBnAddRelu});
    return s.out();
  };
  int64_t h = conv(3, 64, 7, 2, 224, kBnRelu);
  h = (h - 1) / 2 + 1;  // max pool 3x3/2
  int64_t channels = 64;
  const std::vector<int> blocks = depth == 18 ? std::vector<int>{2, 2, 2, 2}
                                              : std::vector<int>{3, 4, 6, 3};
  for (int stage = 0; stage < 4; ++stage) {
    const int64_t width = 64 << stage;
    for (int i = 0; i < blocks[stage]; ++i) {
      const int64_t stride = stage > 0 && i == 0 ? 2 : 1;
      int64_t out_h;
      int64_t out_c = depth == 18 ? width : 4 * width;
      if (depth == 18) {
        out_h = conv(channels, width, 3, stride, h, kBnRelu);
        conv(width, width, 3, 1, out_h, kBnAddRelu);
      } else {
        conv(channels, width, 1, 1, h, kBnRelu);
        out_h = conv(width, width, 3, stride, h, kBnRelu);
        conv(width, out_c, 1, 1, out_h, kBnAddRelu);
      }
      if (stride != 1 || channels != out_c) conv(channels, out_c, 1, stride, h, kBn);
      channels = out_c;
      h = out_h;
    }
  }
  return l;
}

template <typename T>
std::vector<std::pair<T, int>> counted(const std::vector<T>& v) {
  std::map<T, int> m;
  for (const T& x : v) ++m[x];
  // Keep model order (first appearance).
  std::vector<std::pair<T, int>> out;
  for (const T& x : v) {
    if (m.count(x) && m[x] > 0) {
      out.push_back({x, m[x]});
      m[x] = 0;
    }
  }
  return out;
}


double median_ms(int reps, const std::function<void()>& fn) {
  fn();  // warm-up: allocator, caches, primitives
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    const double t0 = now_ms();
    fn();
    ms.push_back(now_ms() - t0);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// The machine's single-core f32 FMA peak: 12 independent chains of 16-float FMAs (enough to
// cover the FMA latency on any current core), measured rather than taken from a spec sheet.
typedef float v16 __attribute__((vector_size(64)));
double fma_peak_gflops() {
  v16 a0 = v16{} + 0.1f, a1 = a0 + 0.1f, a2 = a1 + 0.1f, a3 = a2 + 0.1f, a4 = a3 + 0.1f,
      a5 = a4 + 0.1f, a6 = a5 + 0.1f, a7 = a6 + 0.1f, a8 = a7 + 0.1f, a9 = a8 + 0.1f,
      a10 = a9 + 0.1f, a11 = a10 + 0.1f;
  const v16 m = v16{} + 0.999999f, b = v16{} + 1e-7f;
  const int64_t iters = 50'000'000;
  const double t0 = now_ms();
  for (int64_t it = 0; it < iters; ++it) {  // each line contracts to one FMA (GCC's default)
    a0 = a0 * m + b; a1 = a1 * m + b; a2 = a2 * m + b; a3 = a3 * m + b;
    a4 = a4 * m + b; a5 = a5 * m + b; a6 = a6 * m + b; a7 = a7 * m + b;
    a8 = a8 * m + b; a9 = a9 * m + b; a10 = a10 * m + b; a11 = a11 * m + b;
  }
  const v16 sum = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11;
  asm volatile("" : : "r"(&sum) : "memory");
  return iters * 12 * 16 * 2 / (now_ms() - t0) * 1e-6;
}

std::vector<int> parse_list(const char* s) {
  std::vector<int> out;
  for (const char* p = s; *p;) {
    out.push_back(std::atoi(p));
    while (*p && *p != ',') ++p;
    if (*p == ',') ++p;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model = "resnet50";
  int64_t batch = 8;
  int reps = 5;
  std::vector<int> threads = {1, 2};
  std::string only;  // run only the rows whose name contains this
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--model=", 8) == 0) model = argv[i] + 8;
    else if (std::strncmp(argv[i], "--only=", 7) == 0) only = argv[i] + 7;
    else if (std::strcmp(argv[i], "--clock=cpu") == 0) cpu_clock = true;
    else if (std::strncmp(argv[i], "--batch=", 8) == 0) batch = std::atoll(argv[i] + 8);
    else if (std::strncmp(argv[i], "--reps=", 7) == 0) reps = std::max(1, std::atoi(argv[i] + 7));
    else if (std::strncmp(argv[i], "--threads=", 10) == 0) threads = parse_list(argv[i] + 10);
    else {
      std::fprintf(stderr,
                   "layer_bench: unknown flag %s (--model=resnet18|resnet50 --batch=N "
                   "--threads=1,2 --reps=N --only=substring --clock=cpu)\n",
                   argv[i]);
      return 2;
    }
  }
  if (model != "resnet18" && model != "resnet50") {
    std::fprintf(stderr, "layer_bench: --model must be resnet18 or resnet50, got %s\n",
                 model.c_str());
    return 2;
  }
  const Layers layers = resnet_layers(model == "resnet18" ? 18 : 50);
  std::printf("%s, batch %lld, 224x224; median ms (%s) of %d runs; threads:", model.c_str(),
              static_cast<long long>(batch), cpu_clock ? "process CPU time" : "wall clock", reps);
  for (int t : threads) std::printf(" %d", t);
  set_num_threads(1);
  const double peak = fma_peak_gflops();
  std::printf("\nsingle-core FMA peak (16-float vectors, measured, %s): %.0f GFLOP/s\n\n",
              cpu_clock ? "CPU time" : "wall clock", peak);

  // Every row: a name, how often one step runs it, its GFLOP (0: memory-bound), and fn.
  struct Row {
    std::string name;
    int count;
    double gflop;
    std::function<void()> fn;
  };
  std::vector<Row> rows;
  for (const auto& [s, count] : counted(layers.convs)) {
    Conv2dParams p;
    p.stride = {s.stride, s.stride};
    p.padding = {s.kernel / 2, s.kernel / 2};
    const Tensor x = randn({batch, s.c, s.h, s.h});
    const Tensor w = randn({s.k, s.c, s.kernel, s.kernel});
    const Tensor dy = randn({batch, s.k, s.out(), s.out()});
    const double gflop = 2.0 * batch * s.k * s.out() * s.out() * s.c * s.kernel * s.kernel * 1e-9;
    char name[96];
    std::snprintf(name, sizeof name, "conv %lldx%lld/%lld %4lld->%4lld %3lldx%-3lld",
                  (long long)s.kernel, (long long)s.kernel, (long long)s.stride, (long long)s.c,
                  (long long)s.k, (long long)s.h, (long long)s.h);
    rows.push_back({std::string(name) + " fwd", count, gflop,
                    [=] { conv2d(x, w, Tensor(), p); }});
    if (s.c > 3) {  // the stem's input is the data: no input gradient
      rows.push_back({std::string(name) + " bwd-data", count, gflop,
                      [=] { conv2d_backward_input(dy, w, x.shape(), p); }});
    }
    rows.push_back({std::string(name) + " bwd-weight", count, gflop,
                    [=] { conv2d_backward_weight(dy, x, w.shape(), p); }});
  }
  for (const auto& [s, count] : counted(layers.bns)) {
    const Tensor x = randn({batch, s.c, s.h, s.h}), g = randn({batch, s.c, s.h, s.h});
    const Tensor w = ones({s.c}), b = zeros({s.c}), rm = zeros({s.c}), rv = ones({s.c});
    const BatchNormResult r = batch_norm(x, w, b, rm, rv, true, 0.1, 1e-5);
    char name[96];
    std::snprintf(name, sizeof name, "batchnorm %4lld %3lldx%-3lld", (long long)s.c,
                  (long long)s.h, (long long)s.h);
    rows.push_back({std::string(name) + " fwd", count, 0,
                    [=] { batch_norm(x, w, b, rm, rv, true, 0.1, 1e-5); }});
    rows.push_back({std::string(name) + " bwd", count, 0, [=] {
                      batch_norm_backward(g, x, w, r.mean, r.invstd, true, true, true);
                    }});
  }
  for (const auto& [s, count] : counted(layers.bn_relus)) {
    const Tensor x = randn({batch, s.c, s.h, s.h}), g = randn({batch, s.c, s.h, s.h});
    const Tensor res = s.residual ? randn({batch, s.c, s.h, s.h}) : Tensor();
    const Tensor w = ones({s.c}), b = zeros({s.c}), rm = zeros({s.c}), rv = ones({s.c});
    const BatchNormResult r = batch_norm_relu(x, w, b, res, rm, rv, true, 0.1, 1e-5);
    char name[96];
    std::snprintf(name, sizeof name, "%s %4lld %3lldx%-3lld",
                  s.residual ? "bn+add+relu" : "bn+relu", (long long)s.c, (long long)s.h,
                  (long long)s.h);
    rows.push_back({std::string(name) + " fwd", count, 0,
                    [=] { batch_norm_relu(x, w, b, res, rm, rv, true, 0.1, 1e-5); }});
    rows.push_back({std::string(name) + " bwd", count, 0, [=] {
                      batch_norm_relu_backward(g, r.output, x, w, r.mean, r.invstd, true, true,
                                               true, s.residual);
                    }});
  }
  {
    const Tensor x = randn({batch, 64, 112, 112});
    Pool2dParams p;
    p.kernel = {3, 3};
    p.stride = {2, 2};
    p.padding = {1, 1};
    const auto [y, idx] = max_pool2d_with_indices(x, p);
    const Tensor g = randn(y.shape());
    rows.push_back({"maxpool 3x3/2 64 112x112 fwd", 1, 0,
                    [=] { max_pool2d_with_indices(x, p); }});
    rows.push_back({"maxpool 3x3/2 64 112x112 bwd", 1, 0,
                    [=, idx = idx] { max_pool2d_backward(g, idx, x.shape()); }});
  }
  // The optimizer: SGD with momentum over the real model's parameters, with gradients set.
  auto net = model == "resnet18" ? models::ResNet18(3, 1000) : models::ResNet50(3, 1000);
  auto opt = std::make_shared<optim::SGD>(net->parameters(), optim::SGDOptions(0.01).momentum(0.9));
  for (Variable& v : net->parameters()) v.set_grad(randn(v.data().shape()));
  rows.push_back({"sgd momentum, all parameters", 1, 0, [opt] { opt->step(); }});

  if (!only.empty()) {
    rows.erase(std::remove_if(rows.begin(), rows.end(),
                              [&](const Row& r) { return r.name.find(only) == std::string::npos; }),
               rows.end());
  }
  std::vector<std::vector<double>> ms(rows.size());
  for (int t : threads) {
    set_num_threads(t);
    for (size_t i = 0; i < rows.size(); ++i) ms[i].push_back(median_ms(reps, rows[i].fn));
  }

  std::printf("%-44s %5s", "layer (batch x C x H x W input)", "count");
  for (int t : threads) std::printf(" | %2dthr ms GFLOP/s  x count", t);
  std::printf("\n");
  std::vector<double> total(threads.size(), 0), conv_total(threads.size(), 0);
  for (size_t i = 0; i < rows.size(); ++i) {
    std::printf("%-44s %5d", rows[i].name.c_str(), rows[i].count);
    for (size_t j = 0; j < threads.size(); ++j) {
      const double m = ms[i][j];
      if (rows[i].gflop > 0) {
        std::printf(" | %8.3f %7.1f %8.2f", m, rows[i].gflop / m * 1e3, m * rows[i].count);
        conv_total[j] += m * rows[i].count;
      } else {
        std::printf(" | %8.3f %7s %8.2f", m, "-", m * rows[i].count);
      }
      total[j] += m * rows[i].count;
    }
    std::printf("\n");
  }
  std::printf("%-50s", "sum of convolutions (ms per step)");
  for (double c : conv_total) std::printf(" | %26.1f", c);
  std::printf("\n%-50s", "sum of all rows (ms per step)");
  for (double c : total) std::printf(" | %26.1f", c);
  // The step's work is its convolutions' (the rest is memory-bound): against one core's peak
  // at one thread, against t cores' at t threads (issue 31's target: 70% at one thread).
  double step_gflop = 0;
  for (const Row& r : rows) step_gflop += r.gflop * r.count;
  std::printf("\n%-50s", "step GFLOP / all rows' time, % of peak");
  for (size_t j = 0; j < threads.size(); ++j) {
    const double rate = total[j] > 0 ? step_gflop / total[j] * 1e3 : 0;
    std::printf(" | %8.1f GFLOP %6.1f/s %3.0f%%", step_gflop, rate,
                100 * rate / (peak * threads[j]));
  }
  std::printf("\n");
  return 0;
}
