// explain scaling: the alpha-beta scaling model (cost/scaling.h) for a real model: per N, the
// compute time, the collectives' time, how much of it backward hides, step time, images/s and
// scaling efficiency, after the list of every assumption behind them.
#include <algorithm>
#include <cstdio>

#include "cost/compression.h"
#include "cost/scaling.h"
#include "models/gpt.h"
#include "tools/explain/commands.h"
#include "tools/explain/gnuplot.h"
#include "tools/explain/json_line.h"
#include "tools/explain/model_flags.h"
#include "tools/explain/table.h"

namespace tessera {
namespace explain {

namespace {

const char* const kHelp =
    "usage: explain scaling --model=M [--strategy=ddp|zero3|pipeline|tp|tp-sp|cp-ring|cp-ulysses[,...]]\n"
    "                       [--ranks=1,2,4,...,4096]\n"
    "                       [--latency-us=A] [--bandwidth-gbps=B] [--topology=ring|tree|hierarchical|auto]\n"
    "                       [--ranks-per-node=G] [--compute-ms=T] [--json] [--plot=FILE.svg]\n"
    "Predicted step time, images/s (a GPT's: tokens/s) and scaling efficiency per N (weak scaling: every rank keeps its\n"
    "batch), from each layer's compute time and alpha-beta collective times, with each strategy's\n"
    "overlap of communication and backward. The report lists every assumption.\n"
    "  --strategy=S[,S..]   ddp (default) | zero3 | pipeline; for a GPT's long sequences, strong\n"
    "                       scaling of one replica's batch over N ranks: tp (tensor parallelism),\n"
    "                       tp-sp (with sequence parallelism), cp-ring (ring attention), cp-ulysses;\n"
    "                       a list (ddp,zero3,pipeline) predicts each, one series each in the\n"
    "                       table, the JSON and one picture with a legend\n"
    "  --ranks=N1,N2,...    default 1,2,4,...,4096\n"
    "  --latency-us=A       per message between nodes (default 5)\n"
    "  --bandwidth-gbps=B   per rank between nodes (default 100)\n"
    "  --topology=T         auto (default: fastest per message, as NCCL) | ring | tree | hierarchical\n"
    "  --ranks-per-node=G   ranks per node (default 1; 8 under --topology=hierarchical)\n"
    "  --intra-latency-us=a, --intra-bandwidth-gbps=b   inside a node (default 2 us, 1200 Gb/s)\n"
    "  --bucket-cap-mb=C, --first-bucket-mb=F          DDP's buckets (default 25 and 1)\n"
    "  --stages=K, --micro-batches=M                   the pipeline's (default 4 and 8)\n"
    "  --schedule=S         the pipeline's: gpipe | 1f1b (default) | interleaved | zb-h1 | zb-h2\n"
    "  --chunks=v           model chunks per rank (interleaved; default 1)\n"
    "  --weight-fraction=w  zero bubble: the part of each backward that is the weight gradient W\n"
    "                       (default 0.5; B takes the rest)\n"
    "  --compression=S,...  DDP under gradient compressors, a series each (ddp+S): fp16, bf16,\n"
    "                       randomk:R, topk:R, qsgd:LEVELS, sign, powersgd:RANK, as the train tool\n"
    "                       spells them; none: plain DDP (give it to keep that series too). Each\n"
    "                       f32 bucket is sent as the compressor's messages (all-reduced, or\n"
    "                       all-gathered when they do not add up); compressing takes no time here\n"
    "  --cores=C            the ranks share C cores (0, default: a core per rank); beyond C ranks\n"
    "                       each computes N/C times as long (mpirun on one machine)\n"
    "  --step-all-reduces=k 8-byte all-reduces a step after backward (tools/train: 1, 2 with loss\n"
    "                       scaling; default 0)\n";

std::vector<int64_t> powers_of_two(int64_t up_to) {
  std::vector<int64_t> out;
  for (int64_t n = 1; n <= up_to; n *= 2) out.push_back(n);
  return out;
}

}  // namespace

namespace {

// One series: a strategy's options and its predicted points.
struct Series {
  std::string strategy;
  cost::ScalingOptions options;
  std::vector<cost::ScalingPoint> points;
};

// Each layer's forward + backward, in order.
std::vector<double> layer_seconds(const cost::ModelProfile& profile) {
  std::vector<double> out;
  for (const cost::LayerProfile& l : profile.layers) out.push_back(l.forward_seconds + l.backward_seconds);
  return out;
}

void print_json(const ModelChoice& c, const Series& s, const std::string& unit, double per_example) {
  const cost::ScalingOptions& o = s.options;
  std::printf("%s\n", json::Object(kJsonLine)
                          .add("model", c.name)
                          .add("data", c.input.name)
                          .add("psi", c.profile.parameters())
                          .add("batch", c.batch)
                          .add("strategy", s.strategy)
                          .add("schedule", o.strategy == cost::Strategy::kPipeline && !o.sequence
                                               ? pipeline::schedule_name(o.schedule) : "-")
                          .add("topology", cost::algorithm_name(o.network.algorithm))
                          .add("compute_seconds", c.profile.compute_seconds())
                          .add("times_source", c.profile.times_source)
                          .add("layer_seconds", layer_seconds(c.profile))
                          .add("step_overhead_seconds", c.profile.step_overhead_seconds)
                          .add("assumptions", cost::scaling_assumptions(c.profile, o))
                          .str()
                          .c_str());
  for (const cost::ScalingPoint& p : s.points) {
    std::printf("%s\n", json::Object(kJsonLine)
                            .add("strategy", s.strategy)
                            .add("ranks", p.ranks)
                            .add("replicas", p.replicas)
                            .add("algorithm", p.algorithm)
                            .add("collectives", p.collectives)
                            .add("compute_seconds", p.compute)
                            .add("communication_seconds", p.communication)
                            .add("exposed_seconds", p.exposed)
                            .add("step_seconds", p.step)
                            .add(unit + "_per_second", p.images_per_second * per_example)
                            .add("efficiency", p.efficiency)
                            .str()
                            .c_str());
  }
}

void print_table(const ModelChoice& c, const Series& s, const std::string& unit, double per_example) {
  std::printf("strategy %s, topology %s\nassumptions:\n", s.strategy.c_str(),
              cost::algorithm_name(s.options.network.algorithm));
  for (const std::string& a : cost::scaling_assumptions(c.profile, s.options)) {
    std::printf("  - %s\n", a.c_str());
  }
  Table t({"N", "replicas", "largest via", "collectives", "compute ms", "comm ms", "exposed ms",
           "step ms", unit + "/s", "efficiency"},
          {2});
  for (const cost::ScalingPoint& p : s.points) {
    t.add({std::to_string(p.ranks), std::to_string(p.replicas), p.algorithm,
           std::to_string(p.collectives), milliseconds(p.compute), milliseconds(p.communication),
           milliseconds(p.exposed), milliseconds(p.step), fixed(p.images_per_second * per_example, 1),
           fixed(p.efficiency, 3)});
  }
  std::fputs(t.str().c_str(), stdout);
}

// Efficiency (solid, left axis) and throughput (dashed, right axis) against N, a pair of lines
// per strategy in one colour, the legend outside the plot.
void plot_series(const ModelChoice& c, const std::vector<Series>& series, const std::string& names,
                 const std::string& unit, double per_example, const std::string& plot) {
  const cost::ScalingOptions& o = series[0].options;
  char title[300];
  std::snprintf(title, sizeof(title), "%s, %s, %g us, %g Gb/s, %s: compute %.1f ms per step",
                c.name.c_str(), names.c_str(), o.network.inter.latency * 1e6,
                o.network.inter.bandwidth * 8 / 1e9, cost::algorithm_name(o.network.algorithm),
                c.profile.compute_seconds() * 1e3);
  const bool several = series.size() > 1;
  std::string script = gnuplot_preamble(plot, several ? 960 : 800, 450, title);
  for (size_t i = 0; i < series.size(); ++i) {
    script += "$data" + std::to_string(i) + " << EOD\n";
    for (const cost::ScalingPoint& p : series[i].points) {
      script += std::to_string(p.ranks) + " " + std::to_string(p.efficiency) + " " +
                std::to_string(p.images_per_second * per_example) + "\n";
    }
    script += "EOD\n";
  }
  script +=
      "set logscale x 2\nset logscale y2 10\nset xlabel 'ranks N'\n"
      "set ylabel 'scaling efficiency'\nset yrange [0:1.05]\nset y2label '" + unit + "/s'\n"
      "set ytics nomirror\nset y2tics\n";
  script += several ? "set key outside right top\n" : "set key bottom left\n";
  script += "plot ";
  for (size_t i = 0; i < series.size(); ++i) {
    const std::string data = "$data" + std::to_string(i), lc = " lc " + std::to_string(i + 1);
    const std::string name = several ? series[i].strategy + " " : "";
    script += (i > 0 ? ", " : "") + data + " using 1:2 with linespoints lw 2 pt 7" + lc +
              " title '" + name + "efficiency', " + data + " using 1:3 axes x1y2 with linespoints "
              "lw 1 dt 2 pt 6" + lc + " title '" + name + unit + "/s'";
  }
  run_gnuplot(script + "\n", plot);
}

}  // namespace

int scaling_command(Flags& flags) {
  if (flags.boolean("help")) {
    std::printf("%s%s%s  --json               per strategy, one JSON object with the assumptions, then one per N\n"
                "  --plot=FILE.svg      efficiency and images/s against N, a pair of lines per strategy (gnuplot)\n",
                kHelp, kModelFlagsHelp, kTimeFlagsHelp);
    return 0;
  }
  const std::string names = flags.text("strategy", "ddp");
  const std::vector<std::string> strategies = flags.texts("strategy", "ddp");
  cost::ScalingOptions o;
  const std::vector<int64_t> ranks = flags.integers("ranks", powers_of_two(4096), 1);
  o.network.inter = cost::Link::from(flags.number("latency-us", 5, 0), flags.number("bandwidth-gbps", 100, 1e-9));
  o.network.intra = cost::Link::from(flags.number("intra-latency-us", 2, 0),
                                     flags.number("intra-bandwidth-gbps", 1200, 1e-9));
  o.network.algorithm = parsed("topology", flags.text("topology", "auto"), cost::parse_algorithm);
  o.network.ranks_per_node = static_cast<int>(
      flags.integer("ranks-per-node", o.network.algorithm == cost::Algorithm::kHierarchical ? 8 : 1, 1));
  o.bucket_cap_mb = flags.number("bucket-cap-mb", 25, 1e-6);
  o.first_bucket_mb = flags.number("first-bucket-mb", 1, 1e-6);
  o.stages = static_cast<int>(flags.integer("stages", 4, 1));
  o.microbatches = static_cast<int>(flags.integer("micro-batches", 8, 1));
  o.schedule = parsed("schedule", flags.text("schedule", "1f1b"), pipeline::parse_schedule);
  o.chunks = static_cast<int>(flags.integer("chunks", 1, 1));
  o.weight_fraction = flags.number("weight-fraction", 0.5, 0);
  TS_CHECK(o.weight_fraction <= 1, "--weight-fraction=", o.weight_fraction, ": must be in [0, 1]");
  if (std::find(strategies.begin(), strategies.end(), "pipeline") == strategies.end()) {
    for (const char* name : {"schedule", "chunks", "weight-fraction"}) {
      TS_CHECK(!flags.has(name), "--", name, " is the pipeline's: give --strategy=pipeline");
    }
  }
  o.cores = static_cast<int>(flags.integer("cores", 0, 0));
  o.step_all_reduces = static_cast<int>(flags.integer("step-all-reduces", 0, 0));
  const bool json = flags.boolean("json");
  const std::string plot = flags.text("plot", "");
  ModelChoice c = read_model_flags(flags);
  o.setup = c.setup;
  // DDP under each gradient compressor named ("none": plain DDP), a series each.
  const std::vector<std::string> compressions = flags.texts("compression", "none");
  if (compressions != std::vector<std::string>{"none"}) {
    TS_CHECK(std::find(strategies.begin(), strategies.end(), "ddp") != strategies.end(),
             "--compression compresses DDP's buckets: give --strategy=ddp (or a list with ddp)");
    for (const std::string& name : compressions) {
      if (name == "none") continue;
      parsed("compression", name, [](const std::string& v) {  // checked now, not at the first N
        return cost::compressed_bucket_collectives({1}, {{1}}, v, 2);
      });
    }
  }
  std::vector<std::pair<std::string, std::string>> runs;  // strategy, compression
  for (const std::string& strategy : strategies) {
    if (strategy != "ddp") {
      runs.push_back({strategy, "none"});
      continue;
    }
    for (const std::string& name : compressions) runs.push_back({strategy, name});
  }
  std::vector<Series> series;
  for (const auto& [strategy, compression] : runs) {
    Series s{compression == "none" ? strategy : strategy + "+" + compression, o, {}};
    s.options.compression = compression;
    if (cost::is_sequence_strategy(strategy)) {
      TS_CHECK(c.input.text(), "--strategy=", strategy, " is a GPT's long-sequence strategy: give "
               "--model=gpt-tiny|gpt-nano|gpt2 (not ", c.name, ")");
      s.options.sequence = cost::parse_sequence_strategy(strategy);
      const models::GPTConfig config = models::GPTConfig::named(c.name, c.input.vocab);
      s.options.shape = {c.batch, c.input.seq_len, config.n_embd, config.n_head,
                         c.setup.precision == cost::Precision::kMixed ? 2 : 4};
    } else {
      s.options.strategy = parsed("strategy", strategy, cost::parse_strategy);
    }
    TS_CHECK(std::count(strategies.begin(), strategies.end(), strategy) == 1, "--strategy=", names,
             ": ", strategy, " is listed twice");
    TS_CHECK(std::count(compressions.begin(), compressions.end(), compression) == 1, "--compression=",
             flags.text("compression", ""), ": ", compression, " is listed twice");
    series.push_back(std::move(s));
  }
  add_times(flags, c);
  flags.check_all_used("scaling");
  if (!plot.empty()) check_plot_path(plot);

  for (Series& s : series) {
    for (int64_t n : ranks) {
      try {
        s.points.push_back(cost::predict_step(c.profile, static_cast<int>(n), s.options));
      } catch (const Error& e) {
        TS_CHECK(false, "--ranks=", n, series.size() > 1 ? " (" + s.strategy + ")" : "", ": ", e.message());
      }
    }
  }
  // Throughput in the data's unit: images, or a GPT's tokens (seq_len per window).
  const std::string unit = c.input.text() ? "tokens" : "images";
  const double per_example = c.input.text() ? static_cast<double>(c.input.seq_len) : 1.0;
  if (!json) {
    std::printf("%s\nper-layer times: %s\n", describe(c).c_str(), c.profile.times_source.c_str());
    std::printf("layers (forward + backward ms):");
    for (const cost::LayerProfile& l : c.profile.layers) {
      std::printf(" %s %.3f", l.name.c_str(), (l.forward_seconds + l.backward_seconds) * 1e3);
    }
    std::printf("\n");
  }
  for (const Series& s : series) {
    if (json) {
      print_json(c, s, unit, per_example);
    } else {
      print_table(c, s, unit, per_example);
    }
  }
  if (!plot.empty()) plot_series(c, series, names, unit, per_example, plot);
  return 0;
}

}  // namespace explain
}  // namespace tessera
