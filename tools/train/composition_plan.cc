#include "tools/train/composition_plan.h"

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "tensor/check.h"
#include "tools/train/flags.h"

namespace tessera {
namespace train {

namespace {

// Every run's own flags: a short run (4 steps an epoch on 2 replicas of 16 images each), one
// thread a rank, a constant learning rate (the first epoch of a resumed run is the first epoch of
// the uninterrupted one), SGD with momentum (Adam divides each gradient by its own running
// size, so a gradient that is zero but for rounding moves its weight by the whole learning
// rate, one way or the other: two correct runs summing in another order end a step apart). The
// test adds --epochs, --checkpoint-dir, --resume and --save-model.
std::string base_flags(int batch = 16) {
  return "--batch-size=" + std::to_string(batch) +
         " --threads=1 --seed=3 --schedule=constant --optimizer=sgd --lr=0.05";
}

// The data a model trains on in the plan: Fashion-MNIST's first 128 images for the MLP; for
// ResNet-20, 64 synthetic images (its evaluation on Fashion-MNIST's 10,000 test images would
// take seconds a run); for the GPT (gpt-tiny, bytes, windows of 16), the fortunes' first 64
// training windows (4 steps an epoch on one replica) and 32 validation windows.
std::string data_flags(const std::string& model) {
  if (model == "transformer") return "--train-limit=64 --val-limit=32";
  return model == "plain" ? "--train-limit=128" : "--data=synthetic --synthetic-size=64";
}

// Flags a strategy needs in a short test run: two pipeline stages; local SGD's round of 3
// steps (an epoch of 4 ends mid-round, so a resume starts mid-round); asynchronous SGD bounded
// to synchronous SGD (a deterministic run, so its resume can be compared bit for bit).
std::string strategy_flags(const std::string& strategy) {
  if (strategy == "pipeline") return "--stages=2";
  if (strategy == "local-sgd") return "--sync-period=3";
  if (strategy == "async") return "--staleness-bound=0";
  return "";
}

// The flags of a planned run: the base, the data, the strategy's own, the axes'.
std::string run_flags(const Assignment& v, int batch = 16) {
  std::string flags = base_flags(batch) + " " + data_flags(value_in(v, "model"));
  const std::string own = strategy_flags(value_in(v, "strategy"));
  if (!own.empty()) flags += " " + own;
  return flags + " " + flags_of(v);
}

std::vector<std::string> split_words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

int value_index(const Axis& axis, const std::string& value) {
  const auto it = std::find(axis.values.begin(), axis.values.end(), value);
  TS_INTERNAL_ASSERT(it != axis.values.end(), "axis ", axis.name, " has no value ", value);
  return static_cast<int>(it - axis.values.begin());
}

// A pair of values of two axes, by index: (axis i, value a, axis j, value b) with i < j.
using Pair = std::tuple<int, int, int, int>;

// The run's flags and ranks, and its reference (support_table.h's reference_of).
PlannedRun planned(const Assignment& v) {
  PlannedRun r;
  r.values = v;
  const std::string strategy = value_in(v, "strategy"), model = value_in(v, "model"),
                    compression = value_in(v, "compression");
  const bool tp = value_in(v, "tensor-parallel") == "on";
  const bool cp = value_in(v, "context-parallel") == "on";
  r.flags = run_flags(v);
  // Ranks: 2 data-parallel replicas (a pipeline: 2 stages of them), the tensor- and
  // context-parallel pairs within; one process alone is one replica.
  int replicas = strategy == "single" ? 1 : 2;
  if (strategy == "pipeline") replicas = tp || cp ? 1 : 2;  // at most 8 ranks
  // Ranks of a replica.
  const int unit = (tp ? 2 : 1) * (cp ? 2 : 1) * (strategy == "pipeline" ? 2 : 1);
  r.ranks = replicas * unit;
  // A restart on fewer ranks: the job starts with one replica more (a worker more beside the
  // server), and the launcher restarts it on the plan's ranks.
  r.first_ranks = value_in(v, "restart") == "fewer-ranks" ? r.ranks + unit : r.ranks;
  r.half_precision = value_in(v, "amp") != "off" || value_in(v, "param-dtype") != "f32" ||
                     compression == "fp16" || compression == "bf16";

  // The reference: the same training on the same replicas without the strategy's machinery
  // (DDP for 2 replicas, one process for 1), or for DDP itself one process on the 2-times
  // batch. None where the strategy changes the training by design (lossy compression, local
  // SGD, gossip, asynchronous SGD), nor where BatchNorm's statistics would see other batches
  // (a pipeline's micro-batches, DDP's per-rank batches against one process's whole batch).
  const bool lossy = compression != "none" && compression != "fp16" && compression != "bf16";
  if (lossy || strategy == "local-sgd" || strategy == "gossip" || strategy == "async") return r;
  const bool batch_norm = model == "batch-norm";
  if (batch_norm && strategy == "pipeline") return r;
  std::string reference = replicas == 1 ? "single" : "ddp";
  int batch = 16;
  if (strategy == "ddp" && !tp) {
    if (batch_norm) return r;
    reference = "single", replicas = 1, batch = 32;
  }
  // Loss scaling where a rank's loss is the mean over fewer tokens than its reference's: DDP's
  // 16 examples against one process's 32, a context-parallel rank's S/C tokens of each window
  // (Megatron-LM's choice, which the dp x cp average needs). The gradients inside such a
  // rank's backward are 2 (or C) times the reference's, so from the dynamic scale's start at
  // 65536 an f16 backward can overflow in the run and not in the reference (measured: gpt-tiny
  // under context parallelism, the MLP under DDP with f16 parameters, each skipping its first
  // step), and one step skipped more is another training (0.11-0.28 of a tensor's norm after
  // 16 steps, measured). Both run at a static scale that overflows in neither (a step that did would
  // still be skipped on every rank); the runs whose reference sees the same tokens per rank
  // (ZeRO, the pipeline, tensor parallelism against DDP) keep the dynamic scale, and the AMP
  // tests cover it besides.
  const bool loss_scaled = value_in(v, "amp") == "fp16" || value_in(v, "param-dtype") == "f16";
  const bool fewer_per_rank = cp || (strategy == "ddp" && reference == "single");
  const std::string static_scale = loss_scaled && fewer_per_rank ? " --loss-scale=1024" : "";
  r.flags += static_scale;
  Assignment ref;
  for (const auto& [axis, value] : v) {
    std::string rv = value;
    if (axis == "strategy") rv = reference;
    if (axis == "tensor-parallel" || axis == "sequence-parallel" || axis == "context-parallel") {
      rv = "off";
    }
    if (axis == "collectives") rv = "flat";
    if (axis == "checkpoint") rv = "none";
    if (axis == "resume") rv = "no";
    if (axis == "restart") rv = "none";
    if (axis == "offload") rv = "none";  // DDP keeps its state in memory
    if (axis == "pipeline-schedule" || axis == "dp-strategy") rv = support_axis(axis).values[0];
    // DDP compresses f32 gradients only (half-precision parameters send half gradients).
    if (axis == "compression" && (reference != "ddp" || value_in(v, "param-dtype") != "f32")) {
      rv = "none";
    }
    if (axis == "error-feedback") rv = "off";  // half-precision compression: only DDP's hook
    ref.emplace_back(axis, rv);
  }
  r.reference_flags = run_flags(ref, batch) + static_scale;
  Assignment f32;
  for (auto [axis, value] : ref) {
    if (axis == "amp") value = "off";
    if (axis == "param-dtype") value = "f32";
    if (axis == "compression") value = "none";
    f32.emplace_back(axis, value);
  }
  r.reference_f32_flags = run_flags(f32, batch);
  r.reference_ranks = replicas;
  if (r.reference_flags == r.flags) r.reference_ranks = 0;
  return r;
}

// Whether `axis` can still apply once the axes not chosen yet are: it applies with `chosen`
// and, for each axis its conditions name that is not chosen yet, a value they allow.
bool could_apply(const Axis& axis, const Assignment& chosen) {
  Assignment known = chosen;
  for (const Condition& c : axis.applies_when) {
    if (value_in(known, c.axis).empty()) known.emplace_back(c.axis, c.values[0]);
  }
  return applies(axis, known);
}

}  // namespace

// What a run costs the test, in seconds: the trainings //tests/tools:composition_test starts for
// it (the run; its reference, and the float32 one for a half-precision run; the resumed run's
// two; a restart's launched job on first_ranks and then ranks, and on fewer ranks the checkpoint
// resumed by hand and by the reference), each 0.4 s + 0.44 s a rank + 0.01 s a rank squared
// (fitted to the test's times with Bazel running two tests at once on two cores).
double estimated_cost(const PlannedRun& r) {
  const auto training = [](int n) { return n == 0 ? 0.0 : 0.4 + 0.44 * n + 0.01 * n * n; };
  double cost = training(r.ranks) + training(r.reference_ranks) +
                (r.half_precision ? training(r.reference_ranks) : 0);
  if (value_in(r.values, "resume") == "yes") cost += 2 * training(r.ranks);
  const std::string restart = value_in(r.values, "restart");
  if (restart != "none") cost += training(r.first_ranks) + training(r.ranks);
  if (restart == "fewer-ranks") cost += training(r.ranks) + training(r.reference_ranks);
  return cost;
}

namespace {

class Planner {
 public:
  explicit Planner(uint64_t seed) : axes_(support_axes()), rng_(seed) {
    for (size_t i = 0; i < axes_.size(); ++i) {
      for (size_t j = i + 1; j < axes_.size(); ++j) {
        for (size_t a = 0; a < axes_[i].values.size(); ++a) {
          for (size_t b = 0; b < axes_[j].values.size(); ++b) {
            uncovered_.insert({int(i), int(a), int(j), int(b)});
          }
        }
      }
    }
  }

  CompositionPlan plan() {
    CompositionPlan out;
    std::vector<Pair> order(uncovered_.begin(), uncovered_.end());
    std::vector<Pair> failed;  // no candidate held them when their turn came
    std::vector<std::vector<int>> runs;
    for (const Pair& p : order) {
      if (uncovered_.count(p) == 0) continue;
      // The candidate covering the most new pairs for its cost.
      std::vector<int> best;
      double best_ratio = 0;
      for (int attempt = 0; attempt < kAttempts; ++attempt) {
        std::vector<int> run = candidate(p, kFrugal * attempt / kAttempts);
        if (run.empty()) continue;
        const double ratio = new_pairs(run) / estimated_cost(planned(assignment(run)));
        if (ratio > best_ratio) best_ratio = ratio, best = run;
      }
      if (best.empty()) {
        failed.push_back(p);
        uncovered_.erase(p);
        continue;
      }
      cover(best);
      runs.push_back(best);
    }
    runs = without_redundant(runs);
    for (const std::vector<int>& run : runs) {
      out.runs.push_back(planned(assignment(run)));
      out.estimated_cost += estimated_cost(out.runs.back());
    }
    out.pairs_covered = static_cast<int64_t>(pairs_of(runs).size());
    // A pair whose own candidates all failed may still sit in a run made for another pair: only
    // the pairs no run holds are left uncovered.
    for (const Pair& p : failed) {
      const auto& [i, a, j, b] = p;
      const bool held = std::any_of(runs.begin(), runs.end(),
                                    [&](const std::vector<int>& r) { return r[i] == a && r[j] == b; });
      if (held) continue;
      out.pairs_not_coverable.push_back(axes_[i].name + "=" + axes_[i].values[a] + " " +
                                        axes_[j].name + "=" + axes_[j].values[b]);
    }
    return out;
  }

 private:
  static constexpr int kAttempts = 100;
  static constexpr double kFrugal = 0.3;

  Assignment assignment(const std::vector<int>& run) const {
    Assignment values;
    for (size_t k = 0; k < axes_.size(); ++k) values.emplace_back(axes_[k].name, axes_[k].values[run[k]]);
    return values;
  }

  // A valid run holding pair p, or {} when this attempt found none. The axes are chosen in the
  // table's order (the strategy first, a compressor before error feedback), so whether an axis
  // applies is known when its turn comes; a value is chosen only where no refusal matches what
  // is chosen so far (with the pair, and what its axes need to apply), nor where the pair's
  // later axes could no longer apply.
  std::vector<int> candidate(const Pair& p, double frugal) {
    const auto& [i, a, j, b] = p;
    std::vector<int> run(axes_.size(), -1);
    Assignment chosen;
    // A pair's axis that applies only where others hold some values (the GPT's weight-decay
    // groups: a transformer) needs those values chosen for them before its turn.
    std::vector<Condition> needed;
    for (const auto& [axis, value] : {std::pair<int, int>{i, a}, std::pair<int, int>{j, b}}) {
      if (value == 0) continue;
      for (const Condition& c : axes_[axis].applies_when) needed.push_back(c);
    }
    // What those conditions force (one value allowed): known to the refusals from the start, so
    // an earlier axis avoids a value they would refuse with it (a pipeline's ZeRO with the GPT's
    // decay groups).
    Assignment forced;
    for (const Condition& c : needed) {
      if (c.values.size() == 1) forced.emplace_back(c.axis, c.values[0]);
    }
    for (size_t k = 0; k < axes_.size(); ++k) {
      const Axis& axis = axes_[k];
      std::vector<int> values;
      if (!applies(axis, chosen)) {
        values = {0};
      } else {
        for (size_t v = 0; v < axis.values.size(); ++v) values.push_back(int(v));
        std::shuffle(values.begin(), values.end(), rng_);  // ties at random
        // A frugal attempt leaves some axes at their first value (off, none: the cheapest).
        if (std::bernoulli_distribution(frugal)(rng_)) values = {0};
      }
      for (const Condition& c : needed) {
        if (c.axis != axis.name) continue;
        values.erase(std::remove_if(values.begin(), values.end(), [&](int v) {
                       return std::find(c.values.begin(), c.values.end(), axis.values[v]) ==
                              c.values.end();
                     }),
                     values.end());
      }
      if (int(k) == i || int(k) == j) {
        const int fixed = int(k) == i ? a : b;
        if (std::find(values.begin(), values.end(), fixed) == values.end()) return {};
        values = {fixed};
      }
      // The value covering the most uncovered pairs with those chosen so far.
      int best_value = -1, best_gain = -1;
      for (int v : values) {
        // What is chosen, this value, and the pair (fixed whatever comes before it).
        Assignment with = chosen;
        with.emplace_back(axis.name, axis.values[v]);
        for (const auto& [name, value] : forced) {
          if (value_in(with, name).empty()) with.emplace_back(name, value);
        }
        // The pair's later axes must still apply (a pipeline's schedule needs the pipeline).
        if (int(k) < i && a != 0 && !could_apply(axes_[i], with)) continue;
        if (int(k) < j && b != 0 && !could_apply(axes_[j], with)) continue;
        if (int(k) < i) with.emplace_back(axes_[i].name, axes_[i].values[a]);
        if (int(k) < j) with.emplace_back(axes_[j].name, axes_[j].values[b]);
        if (refusal_for(with) != nullptr) continue;
        int gain = 0;
        for (size_t m = 0; m < k; ++m) gain += uncovered_.count({int(m), run[m], int(k), v});
        for (size_t m = k + 1; m < axes_.size(); ++m) {
          if (int(m) == i) gain += uncovered_.count({int(k), v, i, a});
          if (int(m) == j) gain += uncovered_.count({int(k), v, j, b});
        }
        if (gain > best_gain) best_gain = gain, best_value = v;
      }
      if (best_value < 0) return {};
      run[k] = best_value;
      chosen.emplace_back(axis.name, axis.values[best_value]);
    }
    return valid(chosen) ? run : std::vector<int>();
  }

  static bool valid(const Assignment& values) {
    if (refusal_for(values) != nullptr) return false;
    const std::string flags = run_flags(values) +
                              (value_in(values, "checkpoint") != "none" ? " --checkpoint-dir=d" : "") +
                              (value_in(values, "resume") == "yes" ? " --resume=d" : "");
    Config c;
    try {
      c = read_flags(split_words(flags));
      c.restart = value_in(values, "restart");  // tools/launch's check (not a flag)
      check_support(c);
    } catch (const FlagError&) {
      return false;  // a rule outside the table: the pair shows up as not coverable
    }
    TS_INTERNAL_ASSERT(assignment_of(c) == values, "the support table's flags_for and value_of "
                       "disagree for: ", flags);
    return true;
  }

  // Each pair of values the runs hold, with how many of them hold it.
  static std::map<Pair, int> pairs_of(const std::vector<std::vector<int>>& runs) {
    std::map<Pair, int> count;
    for (const std::vector<int>& run : runs) {
      for (size_t i = 0; i < run.size(); ++i) {
        for (size_t j = i + 1; j < run.size(); ++j) ++count[{int(i), run[i], int(j), run[j]}];
      }
    }
    return count;
  }

  // The runs without those whose every pair other runs hold too (a greedy plan's early runs
  // often are, once later ones cover their pairs), the costliest dropped first.
  std::vector<std::vector<int>> without_redundant(std::vector<std::vector<int>> runs) const {
    std::map<Pair, int> count = pairs_of(runs);
    std::vector<size_t> by_cost(runs.size());
    std::vector<double> cost(runs.size());
    for (size_t r = 0; r < runs.size(); ++r) {
      by_cost[r] = r;
      cost[r] = estimated_cost(planned(assignment(runs[r])));
    }
    std::stable_sort(by_cost.begin(), by_cost.end(), [&](size_t x, size_t y) { return cost[x] > cost[y]; });
    std::vector<bool> dropped(runs.size(), false);
    for (size_t r : by_cost) {
      const std::map<Pair, int> own = pairs_of({runs[r]});
      const bool redundant = std::all_of(own.begin(), own.end(), [&](const auto& p) { return count[p.first] > 1; });
      if (!redundant) continue;
      dropped[r] = true;
      for (const auto& p : own) --count[p.first];
    }
    std::vector<std::vector<int>> kept;
    for (size_t r = 0; r < runs.size(); ++r) {
      if (!dropped[r]) kept.push_back(runs[r]);
    }
    return kept;
  }

  int new_pairs(const std::vector<int>& run) const {
    int n = 0;
    for (size_t i = 0; i < run.size(); ++i) {
      for (size_t j = i + 1; j < run.size(); ++j) n += uncovered_.count({int(i), run[i], int(j), run[j]});
    }
    return n;
  }

  void cover(const std::vector<int>& run) {
    for (size_t i = 0; i < run.size(); ++i) {
      for (size_t j = i + 1; j < run.size(); ++j) uncovered_.erase({int(i), run[i], int(j), run[j]});
    }
  }

  const std::vector<Axis>& axes_;
  std::set<Pair> uncovered_;
  std::mt19937_64 rng_;

};

}  // namespace

std::string flags_of(const Assignment& values) {
  std::string flags;
  for (const Axis& axis : support_axes()) {
    const std::string v = value_in(values, axis.name);
    if (v.empty() || !applies(axis, values)) continue;
    const std::string f = v == axis.values[0] && !axis.always_given ? "" : axis.flags_for(v);
    if (!f.empty()) flags += (flags.empty() ? "" : " ") + f;
  }
  return flags;
}

CompositionPlan composition_plan(uint64_t seed) { return Planner(seed).plan(); }

}  // namespace train
}  // namespace tessera
