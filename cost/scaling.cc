#include "cost/scaling.h"

#include <algorithm>
#include <cstdio>

#include "cost/buckets.h"
#include "cost/compression.h"
#include "cost/overlap.h"
#include "cost/traffic.h"
#include "pipeline/schedule.h"
#include "pipeline/timing_model.h"
#include "tensor/check.h"

namespace tessera {
namespace cost {

const char* strategy_name(Strategy s) {
  switch (s) {
    case Strategy::kDDP: return "ddp";
    case Strategy::kZeRO3: return "zero3";
    case Strategy::kPipeline: return "pipeline";
  }
  return "?";
}

Strategy parse_strategy(const std::string& name) {
  for (Strategy s : {Strategy::kDDP, Strategy::kZeRO3, Strategy::kPipeline}) {
    if (name == strategy_name(s)) return s;
  }
  TS_CHECK(false, "unknown strategy '", name, "' (expected ddp, zero3 or pipeline)");
  return Strategy::kDDP;
}

namespace {

// Remembers the largest collective's algorithm.
struct Issued {
  int count = 0;
  double largest = -1;
  std::string algorithm = "-";
  double operator()(const CollectiveTime& t, double bytes) {
    ++count;
    if (bytes > largest) largest = bytes, algorithm = algorithm_name(t.algorithm);
    return t.seconds;
  }
};

// A data-parallel step's figures, once its timeline has been played (waits for the last collective).
ScalingPoint data_parallel_point(OverlapTimeline& t, const Issued& issued, int ranks) {
  t.wait_all();
  ScalingPoint p;
  p.replicas = ranks;
  p.compute = t.compute_seconds();
  p.communication = t.communication_seconds();
  p.step = t.now();
  p.collectives = issued.count;
  p.algorithm = issued.algorithm;
  return p;
}

ScalingPoint ddp_step(const ModelProfile& model, int ranks, const ScalingOptions& o) {
  const std::vector<int64_t> numels = model.parameter_numels();
  const std::vector<size_t> layer_of = model.parameter_layers();
  const std::vector<std::vector<int64_t>> shapes = model.parameter_shapes();
  // A compressor's hook compresses f32 buckets; plain DDP all-reduces the gradients' dtype.
  const int64_t element_bytes = o.compression == "none" ? o.setup.gradient_bytes() : 4;
  std::vector<int64_t> bytes;
  for (int64_t n : numels) bytes.push_back(n * element_bytes);
  const std::vector<BucketPlan> buckets = assign_buckets(bytes, o.first_bucket_mb, o.bucket_cap_mb);
  std::vector<size_t> bucket_of(numels.size()), pending(buckets.size());
  for (size_t b = 0; b < buckets.size(); ++b) {
    pending[b] = buckets[b].parameters.size();
    for (size_t p : buckets[b].parameters) bucket_of[p] = b;
  }
  OverlapTimeline t;
  Issued issued;
  t.compute(model.forward_seconds());
  size_t next = 0;  // the next bucket to launch: strictly in order, as on every rank
  for (size_t l = model.layers.size(); l-- > 0;) {
    t.compute(model.layers[l].backward_seconds);
    for (size_t p = 0; p < numels.size(); ++p) {
      if (layer_of[p] == l) --pending[bucket_of[p]];
    }
    for (; next < buckets.size() && pending[next] == 0; ++next) {
      if (ranks == 1) continue;
      if (o.compression == "none") {
        const double b = static_cast<double>(buckets[next].bytes);
        t.launch(issued(all_reduce_time(ranks, b, o.network), b));
        continue;
      }
      std::vector<int64_t> bucket_numels;
      std::vector<std::vector<int64_t>> bucket_shapes;
      for (size_t p : buckets[next].parameters) {
        bucket_numels.push_back(numels[p]);
        bucket_shapes.push_back(shapes[p]);
      }
      for (const BucketCollective& c :
           compressed_bucket_collectives(bucket_numels, bucket_shapes, o.compression, ranks)) {
        t.launch(issued(c.all_gather ? all_gather_time(ranks, c.bytes, o.network)
                                     : all_reduce_time(ranks, c.bytes, o.network),
                        c.bytes));
      }
    }
  }
  return data_parallel_point(t, issued, ranks);
}

ScalingPoint zero3_step(const ModelProfile& model, int ranks, const ScalingOptions& o) {
  std::vector<size_t> units;  // layers with parameters, forward order
  for (size_t l = 0; l < model.layers.size(); ++l) {
    if (model.layers[l].parameters() > 0) units.push_back(l);
  }
  auto padded = [&](size_t u) {
    const int64_t n = model.layers[units[u]].parameters();
    return static_cast<double>((n + ranks - 1) / ranks * ranks);
  };
  OverlapTimeline t;
  Issued issued;
  auto gather = [&](size_t u) {
    const double b = padded(u) * o.setup.parameter_bytes();
    return ranks > 1 ? t.launch(issued(all_gather_time(ranks, b, o.network), b)) : -1;
  };
  auto wait = [&](int id) {
    if (id >= 0) t.wait(id);
  };
  // Forward: unit u's gather was launched (prefetched) when unit u-1 started.
  std::vector<int> gathered(units.size(), -1);
  size_t u = 0;
  if (!units.empty()) gathered[0] = gather(0);
  for (size_t l = 0; l < model.layers.size(); ++l) {
    if (u < units.size() && units[u] == l) {
      if (u + 1 < units.size()) gathered[u + 1] = gather(u + 1);
      wait(gathered[u]);
      ++u;
    }
    t.compute(model.layers[l].forward_seconds);
  }
  // Backward, units in reverse: gather again (prefetching the next), compute, reduce-scatter.
  std::vector<int> regathered(units.size(), -1);
  if (!units.empty()) regathered.back() = gather(units.size() - 1);
  size_t remaining = units.size();
  for (size_t l = model.layers.size(); l-- > 0;) {
    const bool is_unit = remaining > 0 && units[remaining - 1] == l;
    if (is_unit) {
      const size_t v = remaining - 1;
      if (v > 0) regathered[v - 1] = gather(v - 1);
      wait(regathered[v]);
    }
    t.compute(model.layers[l].backward_seconds);
    if (is_unit) {
      const double b = padded(remaining - 1) * 4;  // gradients reduced in f32
      if (ranks > 1) t.launch(issued(reduce_scatter_time(ranks, b, o.network), b));
      --remaining;
    }
  }
  return data_parallel_point(t, issued, ranks);
}

ScalingPoint pipeline_step(const ModelProfile& model, int ranks, const ScalingOptions& o) {
  const int k = std::min(o.stages, ranks);
  TS_CHECK(ranks % k == 0, "pipeline: ", ranks, " ranks are not a multiple of ", k,
           " stages (--stages)");
  const int m = o.microbatches, v = o.chunks;
  TS_CHECK(v >= 1, "pipeline: chunks must be >= 1, got ", v);
  TS_CHECK(v == 1 || o.schedule == pipeline::ScheduleKind::kInterleaved, "pipeline: ", v,
           " chunks per rank need the interleaved schedule, not ", pipeline::schedule_name(o.schedule));
  TS_CHECK(o.weight_fraction >= 0 && o.weight_fraction <= 1,
           "pipeline: weight_fraction must be in [0, 1], got ", o.weight_fraction);
  // K x v virtual stages: virtual stage j = c K + s is chunk c on rank s (Megatron-LM's order),
  // each a run of layers cut by time; its times are per micro-batch.
  const int virtual_stages = k * v;
  TS_CHECK(static_cast<size_t>(virtual_stages) <= model.layers.size(), "pipeline: ", k,
           " stages x ", v, " chunks = ", virtual_stages, " parts of ", model.name, "'s ",
           model.layers.size(), " layers");
  const std::vector<size_t> cuts = pipeline_cuts(model, virtual_stages);
  std::vector<pipeline::StageTimes> times(virtual_stages, pipeline::StageTimes{0, 0, 0});
  std::vector<int64_t> rank_params(k, 0);
  std::vector<double> send_seconds(virtual_stages, 0);  // virtual stage j's output, per micro-batch
  size_t first = 0;
  for (int j = 0; j < virtual_stages; ++j) {
    for (size_t l = first; l <= cuts[j]; ++l) {
      times[j].forward += model.layers[l].forward_seconds / m;
      times[j].backward += model.layers[l].backward_seconds / m;
      rank_params[j % k] += model.layers[l].parameters();
    }
    times[j].weight = o.weight_fraction * times[j].backward;
    const double bytes = static_cast<double>(model.layers[cuts[j]].output_elements) * model.batch / m *
                         o.setup.parameter_bytes();
    send_seconds[j] = o.network.inter.message_seconds(bytes);
    first = cuts[j] + 1;
  }
  const auto lists = pipeline::make_schedules(o.schedule, k, m, v);
  const bool split = pipeline::splits_backward(lists[0]);
  const pipeline::TimedStep played = pipeline::play_timed(lists, v, [&](int s, size_t n) {
    const pipeline::Action& a = lists[s][n];
    const int j = a.chunk * k + s;
    switch (a.kind) {
      case pipeline::ActionKind::kForward: return times[j].forward;
      case pipeline::ActionKind::kBackward:  // the input gradient alone when W is split off
        return split ? times[j].backward - times[j].weight : times[j].backward;
      case pipeline::ActionKind::kWeight: return times[j].weight;
      case pipeline::ActionKind::kSendActivation: return send_seconds[j];
      case pipeline::ActionKind::kSendGradient: return send_seconds[j - 1];
      default: return 0.0;  // receives: the message has arrived once its send ended
    }
  });
  ScalingPoint p;
  p.replicas = ranks / k;
  const int64_t largest = *std::max_element(rank_params.begin(), rank_params.end());
  const double grad_bytes = static_cast<double>(largest) * o.setup.gradient_bytes();
  Issued issued;
  const double reduce = p.replicas > 1 ? issued(all_reduce_time(p.replicas, grad_bytes, o.network), grad_bytes) : 0;
  std::vector<double> busy(k, 0);
  for (int j = 0; j < virtual_stages; ++j) busy[j % k] += (times[j].forward + times[j].backward) * m;
  p.compute = *std::max_element(busy.begin(), busy.end());
  p.communication = reduce;
  for (int j = 0; j + 1 < virtual_stages; ++j) p.communication += 2 * m * send_seconds[j];
  p.step = played.makespan + reduce;
  p.collectives = issued.count + 2 * m * (virtual_stages - 1);
  p.algorithm = issued.algorithm;
  return p;
}

}  // namespace

ScalingPoint predict_step(const ModelProfile& model, int ranks, const ScalingOptions& o) {
  TS_CHECK(ranks >= 1, "predict_step: ranks must be >= 1, got ", ranks);
  TS_CHECK(model.compute_seconds() > 0, "predict_step: ", model.name,
           " has no compute times (measure them, or give --compute-ms or --layer-ms)");
  TS_CHECK(o.cores >= 0 && o.step_all_reduces >= 0, "predict_step: cores ", o.cores,
           " and step_all_reduces ", o.step_all_reduces, " must be >= 0");
  // Ranks sharing cores: each computes N/C times as long (the layers and the step overhead).
  const double share = o.cores > 0 ? std::max(1.0, static_cast<double>(ranks) / o.cores) : 1.0;
  ModelProfile m = model;
  for (LayerProfile& l : m.layers) {
    l.forward_seconds *= share;
    l.backward_seconds *= share;
  }
  if (o.sequence) {
    // Strong scaling: the ranks share one batch (the overhead's split is sequence_step's).
    ModelProfile shared = m;
    shared.step_overhead_seconds *= share;
    const SequenceStep s = sequence_step(shared, o.shape, ranks, *o.sequence, o.network);
    ScalingPoint p;
    p.ranks = ranks;
    p.compute = s.compute, p.communication = s.communication, p.exposed = s.exposed;
    p.step = s.step, p.collectives = s.collectives;
    p.algorithm = ranks > 1 ? sequence_strategy_name(*o.sequence) : "-";
    p.images_per_second = model.batch / p.step;
    p.efficiency = p.images_per_second /
                   (ranks * model.batch / (model.compute_seconds() + model.step_overhead_seconds));
    return p;
  }
  ScalingPoint p = o.strategy == Strategy::kDDP     ? ddp_step(m, ranks, o)
                   : o.strategy == Strategy::kZeRO3 ? zero3_step(m, ranks, o)
                                                    : pipeline_step(m, ranks, o);
  const double overhead = model.step_overhead_seconds * share;
  p.compute += overhead;
  p.step += overhead;
  if (ranks > 1 && o.step_all_reduces > 0) {
    const double checks = o.step_all_reduces * all_reduce_time(ranks, 8, o.network).seconds;
    p.communication += checks;
    p.step += checks;
    p.collectives += o.step_all_reduces;
  }
  p.ranks = ranks;
  p.exposed = p.step - p.compute;
  p.images_per_second = p.replicas * model.batch / p.step;
  p.efficiency = p.images_per_second /
                 (ranks * model.batch / (model.compute_seconds() + model.step_overhead_seconds));
  return p;
}

std::vector<ScalingPoint> predict_scaling(const ModelProfile& model, const std::vector<int>& ranks,
                                          const ScalingOptions& options) {
  std::vector<ScalingPoint> out;
  for (int n : ranks) out.push_back(predict_step(model, n, options));
  return out;
}

std::vector<std::string> scaling_assumptions(const ModelProfile& model, const ScalingOptions& o) {
  char buf[400];
  std::vector<std::string> a;
  std::snprintf(buf, sizeof(buf),
                o.sequence ? "strong scaling: the N ranks share one batch of %lld, which one rank "
                             "computes in %.3f ms (forward %.3f, backward %.3f; %s)"
                           : "weak scaling: every rank keeps a batch of %lld and computes it in "
                             "%.3f ms (forward %.3f, backward %.3f; %s), whatever N",
                static_cast<long long>(model.batch), model.compute_seconds() * 1e3,
                model.forward_seconds() * 1e3, model.backward_seconds() * 1e3,
                model.times_source.c_str());
  a.push_back(buf);
  std::snprintf(buf, sizeof(buf),
                "network: alpha-beta, %.1f us and %.1f Gb/s between nodes%s; full-duplex links, "
                "one per rank, no congestion",
                o.network.inter.latency * 1e6, o.network.inter.bandwidth * 8 / 1e9,
                o.network.ranks_per_node > 1 ? "" : " (every link)");
  a.push_back(buf);
  if (o.network.ranks_per_node > 1) {
    std::snprintf(buf, sizeof(buf), "%d ranks per node, %.1f us and %.1f Gb/s inside a node",
                  o.network.ranks_per_node, o.network.intra.latency * 1e6,
                  o.network.intra.bandwidth * 8 / 1e9);
    a.push_back(buf);
  }
  a.push_back(std::string("collectives: ") + algorithm_name(o.network.algorithm) +
              (o.network.algorithm == Algorithm::kAuto
                   ? " (the fastest of ring 2(N-1)a + 2(N-1)/N n/b, tree 2 log2(N) a + 2 n/b"
                     " and, with ranks per node, hierarchical; per message, as NCCL's tuner)"
                   : "") +
              "; reduce-scatter and all-gather are rings (or two-level under hierarchical)");
  a.push_back("one communication stream: collectives run one at a time in issue order and do not "
              "slow the computation they overlap");
  if (model.step_overhead_seconds > 0) {
    std::snprintf(buf, sizeof(buf), "step overhead %.3f ms a step (the loss, the engine, the "
                  "optimizer step: a whole step less the layers), not overlapped",
                  model.step_overhead_seconds * 1e3);
    a.push_back(buf);
  }
  if (o.cores > 0) {
    std::snprintf(buf, sizeof(buf), "the ranks share %d cores: beyond %d ranks every rank "
                  "computes N/%d times as long", o.cores, o.cores, o.cores);
    a.push_back(buf);
  }
  if (o.step_all_reduces > 0) {
    std::snprintf(buf, sizeof(buf), "%d all-reduce(s) of 8 bytes a step after backward (a loss or "
                  "NaN check), not overlapped", o.step_all_reduces);
    a.push_back(buf);
  }
  if (o.sequence) {
    a.push_back(sequence_assumption(*o.sequence));
  } else if (o.strategy == Strategy::kDDP) {
    std::snprintf(buf, sizeof(buf),
                  "DDP: buckets of %g MB (the first %g MB) in reverse registration order; a layer's "
                  "gradients are ready when its backward ends; buckets all-reduced strictly in order",
                  o.bucket_cap_mb, o.first_bucket_mb);
    a.push_back(buf);
    if (o.compression != "none") {
      a.push_back("gradient compression " + o.compression + ": each f32 bucket sent as the "
                  "compressor's messages (all-reduced when they add up, all-gathered when not); "
                  "compressing and decompressing take no time here");
    }
  } else if (o.strategy == Strategy::kZeRO3) {
    a.push_back("ZeRO-3: one unit per layer with parameters, all-gathered before its forward and "
                "again before its backward (one unit prefetched ahead), gradients reduce-scattered "
                "in f32 after its backward");
  } else {
    std::snprintf(buf, sizeof(buf),
                  "pipeline: %s, K = min(%d, N) stages%s cut by time, M = %d micro-batches, N/K "
                  "replicas; a send costs its sender a + bytes/b; the stage's gradients all-reduced "
                  "across replicas after the flush, not overlapped",
                  pipeline::schedule_name(o.schedule), o.stages,
                  o.chunks > 1 ? (" x " + std::to_string(o.chunks) + " chunks").c_str() : "",
                  o.microbatches);
    a.push_back(buf);
    if (o.schedule == pipeline::ScheduleKind::kZBH1 || o.schedule == pipeline::ScheduleKind::kZBH2) {
      std::snprintf(buf, sizeof(buf),
                    "zero bubble: each backward split into B (input gradient, %.0f%% of it) and W "
                    "(weight gradient, %.0f%%), W deferred into the bubble",
                    100 * (1 - o.weight_fraction), 100 * o.weight_fraction);
      a.push_back(buf);
    }
  }
  a.push_back(std::string("not counted: ") +
              (model.step_overhead_seconds > 0 ? "" : "the optimizer step, the loss, ") +
              "data loading, gradient averaging; the single-rank baseline computes without "
              "communicating");
  return a;
}

}  // namespace cost
}  // namespace tessera
