#include "cost/traffic.h"

#include <algorithm>
#include <cstdio>

#include "cost/buckets.h"
#include "dist/zero/memory_model.h"
#include "pipeline/balance.h"
#include "tensor/check.h"

namespace tessera {
namespace cost {

namespace {

using dist::zero::Sharding;

constexpr int64_t kMessageHeaderBytes = 12 * 8;  // pipeline/p2p.h: i64 x 12

// One ring pass (reduce-scatter or all-gather) of n bytes: what one rank sends.
double ring_pass_bytes(int ranks, double bytes) { return (ranks - 1) * bytes / ranks; }

std::string num(double v) {
  char s[32];
  std::snprintf(s, sizeof(s), "%g", v);
  return s;
}

void add_data_parallel(const ModelProfile& model, const TrainingSetup& setup,
                       const TrafficOptions& o, std::vector<Transfer>& out) {
  const int n = o.ranks;
  const int64_t psi = model.parameters();
  const int64_t g = setup.gradient_bytes();
  std::vector<int64_t> grad_bytes;
  for (int64_t numel : model.parameter_numels()) grad_bytes.push_back(numel * g);
  const auto buckets = assign_buckets(grad_bytes, o.first_bucket_mb, o.bucket_cap_mb);
  out.push_back({"ddp", "all_reduce", n > 1 ? static_cast<int64_t>(buckets.size()) : 0,
                 static_cast<double>(dist::zero::predicted_comm_bytes(Sharding::kNone, psi, g, n)),
                 "2 (N-1)/N x " + num(g) + " psi"});
  // ZeRO-1/2: reduce-scatter of the f32 flat gradient (stage 2 bucket by bucket), all-gather
  // of the f32 flat parameters; each half of predicted_comm_bytes.
  const double half = dist::zero::predicted_comm_bytes(Sharding::kStage1, psi, 4, n) / 2.0;
  std::vector<int64_t> flat_bytes;
  for (int64_t numel : model.parameter_numels()) flat_bytes.push_back(numel * 4);
  const int64_t stage2_buckets =
      static_cast<int64_t>(assign_buckets(flat_bytes, o.bucket_cap_mb, o.bucket_cap_mb).size());
  for (int stage : {1, 2}) {
    const std::string name = "zero" + std::to_string(stage);
    const int64_t calls = n > 1 ? 1 : 0;
    out.push_back({name, "reduce_scatter", stage == 1 ? calls : (n > 1 ? stage2_buckets : 0), half,
                   "(N-1)/N x 4 psi"});
    out.push_back({name, "all_gather", calls, half, "(N-1)/N x 4 psi"});
  }
  // ZeRO-3: one unit per layer with parameters, padded to a multiple of N.
  int64_t units = 0, padded = 0;
  for (const LayerProfile& l : model.layers) {
    if (l.parameters() == 0) continue;
    ++units;
    padded += (l.parameters() + n - 1) / n * n;
  }
  const int64_t p = setup.parameter_bytes();
  out.push_back({"zero3", "all_gather", n > 1 ? 2 * units : 0, 2 * ring_pass_bytes(n, padded * p),
                 "2 (N-1)/N x " + num(p) + " P"});
  out.push_back({"zero3", "reduce_scatter", n > 1 ? units : 0, ring_pass_bytes(n, padded * 4),
                 "(N-1)/N x 4 P"});
}

void add_pipeline(const ModelProfile& model, const TrainingSetup& setup, const TrafficOptions& o,
                  std::vector<Transfer>& out) {
  const int k = o.stages;
  if (k < 2 || static_cast<int>(model.layers.size()) < k) return;
  const std::vector<size_t> cuts = pipeline_cuts(model, k);
  const double per_microbatch = static_cast<double>(model.batch) / o.microbatches;
  // The activation leaving stage s (s < K-1), per micro-batch, in bytes.
  auto cut_bytes = [&](int s) {
    return model.layers[cuts[s]].output_elements * per_microbatch * setup.parameter_bytes();
  };
  double busiest = 0;
  int64_t busiest_calls = 0;
  for (int s = 0; s < k; ++s) {
    double bytes = 0;
    int64_t calls = 0;
    if (s < k - 1) bytes += cut_bytes(s) + kMessageHeaderBytes, calls += 2;  // activation
    if (s > 0) bytes += cut_bytes(s - 1) + kMessageHeaderBytes, calls += 2;  // gradient
    if (bytes > busiest) busiest = bytes, busiest_calls = calls;
  }
  out.push_back({"pipeline", "send", busiest_calls * o.microbatches, busiest * o.microbatches,
                 "M x (activation out + gradient in + 2 x 96 header)"});
}

void add_tensor_parallel(const ModelProfile& model, const TrainingSetup& setup,
                         const TrafficOptions& o, std::vector<Transfer>& out) {
  const int t = o.tensor_parallel;
  if (t < 2 || model.tensor_parallel_all_reduces.empty()) return;
  // Repeated all-reduces (a GPT's, once per block) are said once with their count: "12 x ...".
  int64_t elements = 0;
  std::vector<std::pair<std::string, int>> kinds;
  for (const auto& [name, per_example] : model.tensor_parallel_all_reduces) {
    elements += per_example;
    auto same = std::find_if(kinds.begin(), kinds.end(), [&](const auto& k) { return k.first == name; });
    if (same == kinds.end()) kinds.push_back({name, 1}); else ++same->second;
  }
  std::string what;
  for (const auto& [name, count] : kinds) {
    what += (what.empty() ? "" : " + ") + (count > 1 ? std::to_string(count) + " x " : "") + name;
  }
  const double bytes = 2 * ring_pass_bytes(t, static_cast<double>(elements) * model.batch *
                                                  setup.parameter_bytes());
  out.push_back({"tensor_parallel", "all_reduce",
                 static_cast<int64_t>(model.tensor_parallel_all_reduces.size()), bytes,
                 "2 (T-1)/T x batch x (" + what + ")"});
}

}  // namespace

std::vector<size_t> pipeline_cuts(const ModelProfile& model, int stages) {
  TS_CHECK(stages >= 1 && stages <= static_cast<int>(model.layers.size()), "a pipeline of ",
           stages, " stages needs at least as many layers; ", model.name, " has ",
           model.layers.size());
  std::vector<double> costs;
  const bool timed = model.compute_seconds() > 0;
  for (const LayerProfile& l : model.layers) {
    costs.push_back(timed ? l.forward_seconds + l.backward_seconds : static_cast<double>(l.parameters()));
  }
  std::vector<size_t> cuts;
  size_t end = 0;
  for (int count : pipeline::balance_by_cost(costs, stages)) {
    end += count;
    cuts.push_back(end - 1);
  }
  return cuts;
}

std::vector<Transfer> traffic_per_step(const ModelProfile& model, const TrainingSetup& setup,
                                       const TrafficOptions& o) {
  TS_CHECK(o.ranks >= 1 && o.stages >= 1 && o.microbatches >= 1 && o.tensor_parallel >= 1,
           "traffic_per_step: ranks ", o.ranks, ", stages ", o.stages, ", micro-batches ",
           o.microbatches, ", tensor parallel ", o.tensor_parallel, " (each must be >= 1)");
  std::vector<Transfer> out;
  add_data_parallel(model, setup, o, out);
  add_pipeline(model, setup, o, out);
  add_tensor_parallel(model, setup, o, out);
  return out;
}

}  // namespace cost
}  // namespace tessera
