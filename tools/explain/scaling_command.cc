// explain scaling: the alpha-beta scaling model (cost/scaling.h) for a real model: per N, the
// compute time, the collectives' time, how much of it backward hides, step time, images/s and
// scaling efficiency, after the list of every assumption behind them.
#include <cstdio>

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
    "usage: explain scaling --model=M [--strategy=ddp|zero3|pipeline|tp|tp-sp|cp-ring|cp-ulysses]\n"
    "                       [--ranks=1,2,4,...,4096]\n"
    "                       [--latency-us=A] [--bandwidth-gbps=B] [--topology=ring|tree|hierarchical|auto]\n"
    "                       [--ranks-per-node=G] [--compute-ms=T] [--json] [--plot=FILE.svg]\n"
    "Predicted step time, images/s (a GPT's: tokens/s) and scaling efficiency per N (weak scaling: every rank keeps its\n"
    "batch), from each layer's compute time and alpha-beta collective times, with each strategy's\n"
    "overlap of communication and backward. The report lists every assumption.\n"
    "  --strategy=S         ddp (default) | zero3 | pipeline; for a GPT's long sequences, strong\n"
    "                       scaling of one replica's batch over N ranks: tp (tensor parallelism),\n"
    "                       tp-sp (with sequence parallelism), cp-ring (ring attention), cp-ulysses\n"
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

int scaling_command(Flags& flags) {
  if (flags.boolean("help")) {
    std::printf("%s%s%s  --json               one JSON object with the assumptions, then one per N\n"
                "  --plot=FILE.svg      efficiency and images/s against N (gnuplot)\n",
                kHelp, kModelFlagsHelp, kTimeFlagsHelp);
    return 0;
  }
  cost::ScalingOptions o;
  const std::string strategy = flags.text("strategy", "ddp");
  if (cost::is_sequence_strategy(strategy)) {
    o.sequence = cost::parse_sequence_strategy(strategy);
  } else {
    o.strategy = parsed("strategy", strategy, cost::parse_strategy);
  }
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
  if (o.strategy != cost::Strategy::kPipeline) {
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
  if (o.sequence) {
    TS_CHECK(c.input.text(), "--strategy=", strategy, " is a GPT's long-sequence strategy: give "
             "--model=gpt-tiny|gpt-nano|gpt2 (not ", c.name, ")");
    const models::GPTConfig config = models::GPTConfig::named(c.name, c.input.vocab);
    o.shape = {c.batch, c.input.seq_len, config.n_embd, config.n_head,
               c.setup.precision == cost::Precision::kMixed ? 2 : 4};
  }
  add_times(flags, c);
  flags.check_all_used("scaling");
  if (!plot.empty()) check_plot_path(plot);

  std::vector<cost::ScalingPoint> points;
  for (int64_t n : ranks) {
    try {
      points.push_back(cost::predict_step(c.profile, static_cast<int>(n), o));
    } catch (const Error& e) {
      TS_CHECK(false, "--ranks=", n, ": ", e.message());
    }
  }
  const std::vector<std::string> assumptions = cost::scaling_assumptions(c.profile, o);
  // Throughput in the data's unit: images, or a GPT's tokens (seq_len per window).
  const std::string unit = c.input.text() ? "tokens" : "images";
  const double per_example = c.input.text() ? static_cast<double>(c.input.seq_len) : 1.0;
  if (json) {
    std::printf("%s\n", json::Object(kJsonLine)
                            .add("model", c.name)
                            .add("data", c.input.name)
                            .add("psi", c.profile.parameters())
                            .add("batch", c.batch)
                            .add("strategy", strategy)
                            .add("schedule", o.strategy == cost::Strategy::kPipeline
                                                 ? pipeline::schedule_name(o.schedule) : "-")
                            .add("topology", cost::algorithm_name(o.network.algorithm))
                            .add("compute_seconds", c.profile.compute_seconds())
                            .add("times_source", c.profile.times_source)
                            .add("assumptions", assumptions)
                            .str()
                            .c_str());
    for (const cost::ScalingPoint& p : points) {
      std::printf("%s\n", json::Object(kJsonLine)
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
  } else {
    std::printf("%s\nper-layer times: %s\nstrategy %s, topology %s\nassumptions:\n",
                describe(c).c_str(), c.profile.times_source.c_str(), strategy.c_str(),
                cost::algorithm_name(o.network.algorithm));
    for (const std::string& a : assumptions) std::printf("  - %s\n", a.c_str());
    std::printf("layers (forward + backward ms):");
    for (const cost::LayerProfile& l : c.profile.layers) {
      std::printf(" %s %.3f", l.name.c_str(), (l.forward_seconds + l.backward_seconds) * 1e3);
    }
    std::printf("\n");
    Table t({"N", "replicas", "largest via", "collectives", "compute ms", "comm ms", "exposed ms",
             "step ms", unit + "/s", "efficiency"},
            {2});
    for (const cost::ScalingPoint& p : points) {
      t.add({std::to_string(p.ranks), std::to_string(p.replicas), p.algorithm,
             std::to_string(p.collectives), milliseconds(p.compute), milliseconds(p.communication),
             milliseconds(p.exposed), milliseconds(p.step), fixed(p.images_per_second * per_example, 1),
             fixed(p.efficiency, 3)});
    }
    std::fputs(t.str().c_str(), stdout);
  }
  if (!plot.empty()) {
    char title[300];
    std::snprintf(title, sizeof(title), "%s, %s, %g us, %g Gb/s, %s: compute %.1f ms per step",
                  c.name.c_str(), strategy.c_str(), o.network.inter.latency * 1e6,
                  o.network.inter.bandwidth * 8 / 1e9, cost::algorithm_name(o.network.algorithm),
                  c.profile.compute_seconds() * 1e3);
    std::string script = gnuplot_preamble(plot, 800, 450, title);
    script += "$data << EOD\n";
    for (const cost::ScalingPoint& p : points) {
      script += std::to_string(p.ranks) + " " + std::to_string(p.efficiency) + " " +
                std::to_string(p.images_per_second * per_example) + "\n";
    }
    script +=
        "EOD\n"
        "set logscale x 2\nset logscale y2 10\nset xlabel 'ranks N'\n"
        "set ylabel 'scaling efficiency'\nset yrange [0:1.05]\nset y2label '" + unit + "/s'\n"
        "set ytics nomirror\nset y2tics\nset key bottom left\n"
        "plot $data using 1:2 with linespoints lw 2 pt 7 title 'efficiency', "
        "'' using 1:3 axes x1y2 with linespoints lw 1 dt 2 pt 6 title '" + unit + "/s'\n";
    run_gnuplot(script, plot);
  }
  return 0;
}

}  // namespace explain
}  // namespace tessera
