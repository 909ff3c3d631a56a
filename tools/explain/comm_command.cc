// explain comm: the bytes one rank sends per training step, per strategy and per collective, as
// the process groups' ByteLedger counts them (cost/traffic.h), each beside its formula.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>

#include "cost/compression.h"
#include "cost/scaling.h"
#include "cost/sequence_traffic.h"
#include "cost/traffic.h"
#include "tools/explain/comm_run.h"
#include "tools/explain/commands.h"
#include "tools/explain/gnuplot.h"
#include "tools/explain/json_line.h"
#include "tools/explain/model_flags.h"
#include "tools/explain/svg_bars.h"
#include "tools/explain/table.h"

namespace tessera {
namespace explain {

namespace {

const char* const kHelp =
    "usage: explain comm --model=M --ranks=N [--stages=K] [--micro-batches=M] [--tensor-parallel=T]\n"
    "                    [--bucket-cap-mb=C] [--first-bucket-mb=F] [--json] [--plot=FILE.svg]\n"
    "Bytes one rank sends per step, per strategy and collective, as dist/byte_ledger.h counts them:\n"
    "DDP's bucket all-reduces, ZeRO-1/2's reduce-scatter and all-gather, ZeRO-3's two all-gathers\n"
    "and reduce-scatter per unit (one unit per layer with parameters), a K-stage pipeline's\n"
    "activation and gradient sends (its busiest stage), T-way tensor parallelism's all-reduces.\n"
    "  --ranks=N            data-parallel ranks (required)\n"
    "  --stages=K           pipeline stages (default 2), cut by parameters\n"
    "  --micro-batches=M    pipeline micro-batches per batch (default 4)\n"
    "  --tensor-parallel=T  tensor-parallel ranks (default 2)\n"
    "  --bucket-cap-mb=C    DDP's bucket cap (default 25); --first-bucket-mb=F its first (default 1)\n"
    "  --compression=S,...  DDP with gradient compression too, one row each (ddp+S): fp16, bf16,\n"
    "                       randomk:R, topk:R, qsgd:LEVELS[:BUCKET], sign, powersgd:RANK, as the train tool\n"
    "                       spells them; all: one of each\n"
    "  --bandwidth-gbps=B, --latency-us=A  a network (default 100 Gb/s, 5 us when either is given):\n"
    "                       each row's step time too, explain scaling's model at N (ddp, zero3 and\n"
    "                       DDP under each compressor; --json: step_seconds, null where not\n"
    "                       modelled), from the stored per-layer profile or --compute-ms, --measure\n"
    "  --run=FILE           a real run's train output (its final JSON line): that strategy's rows,\n"
    "                       each formula beside the calls and bytes rank 0's byte ledgers counted\n"
    "                       per training step (ddp, zero1, zero2, zero3 runs; pass the run's\n"
    "                       --model and bucket flags; --ranks and --compression default to the\n"
    "                       run's)\n"
    "A GPT also gets bytes per transformer layer under the long-sequence techniques\n"
    "(cost/sequence_traffic.h, docs/SEQUENCE.md), at --seq-len, --batch and --tensor-parallel:\n"
    "  --sequence-parallel  Megatron-LM's sequence parallelism beside tensor parallelism\n"
    "  --context-parallel=C ring attention over C ranks (default 1)\n";

// The rows as bars grouped by strategy, a bar per collective in the collective's colour, each
// bar's bytes above it, on a log axis (a compressor's 0.016 MB beside ZeRO-3's 2.4 MB).
std::string comm_bars_svg(const std::vector<cost::Transfer>& rows, const std::string& title) {
  BarChart chart;
  chart.title = title;
  chart.y_label = "bytes per rank per step";
  chart.log_y = true;
  for (const cost::Transfer& x : rows) {
    if (std::find(chart.groups.begin(), chart.groups.end(), x.strategy) == chart.groups.end()) {
      chart.groups.push_back(x.strategy);
    }
    if (std::find(chart.series.begin(), chart.series.end(), x.collective) == chart.series.end()) {
      chart.series.push_back(x.collective);
    }
  }
  chart.values.assign(chart.series.size(), std::vector<double>(chart.groups.size(), -1));
  chart.labels.assign(chart.series.size(), std::vector<std::string>(chart.groups.size()));
  for (const cost::Transfer& x : rows) {
    const size_t g = std::find(chart.groups.begin(), chart.groups.end(), x.strategy) - chart.groups.begin();
    const size_t k = std::find(chart.series.begin(), chart.series.end(), x.collective) - chart.series.begin();
    chart.values[k][g] = std::max(0.0, chart.values[k][g]) + x.bytes;
    chart.labels[k][g] = megabytes(chart.values[k][g]);
  }
  return bars_svg(chart);
}

// A row's strategy's step on N ranks under explain scaling's model (ddp, zero3, ddp+S), or
// nullopt where that model has none (ZeRO-1/2, the pipeline and tensor parallelism as comm
// prices them: one replica).
std::optional<double> step_seconds(const ModelChoice& c, const cost::TrafficOptions& t,
                                   const cost::Network& network, const std::string& strategy) {
  cost::ScalingOptions o;
  o.network = network;
  o.setup = c.setup;
  o.first_bucket_mb = t.first_bucket_mb;
  o.bucket_cap_mb = t.bucket_cap_mb;
  if (strategy == "zero3") {
    o.strategy = cost::Strategy::kZeRO3;
  } else if (strategy == "ddp" || strategy.rfind("ddp+", 0) == 0) {
    o.compression = strategy == "ddp" ? "none" : strategy.substr(4);
  } else {
    return std::nullopt;
  }
  return cost::predict_step(c.profile, t.ranks, o).step;
}

// A GPT's bytes per transformer layer: tensor parallelism (or, with --sequence-parallel, its
// sequence-parallel form) and ring attention.
void print_sequence_traffic(const ModelChoice& c, const cost::SequenceLayout& layout, bool json) {
  const models::GPTConfig config = cost::gpt_config(c.name, c.input);
  const int64_t p = c.setup.precision == cost::Precision::kMixed ? 2 : 4;
  const auto rows = cost::sequence_layer_traffic(c.batch, c.input.seq_len, config.n_embd, p, layout);
  if (json) {
    for (const cost::LayerTraffic& r : rows) {
      std::printf("%s\n", json::Object(kJsonLine)
                              .add("model", c.name).add("seq_len", c.input.seq_len)
                              .add("batch", c.batch).add("tensor_parallel", layout.tensor_parallel)
                              .add_raw("sequence_parallel", layout.sequence_parallel ? "true" : "false")
                              .add("context_parallel", layout.context_parallel)
                              .add("technique", r.technique).add("bytes_per_layer", r.bytes)
                              .add("formula", r.formula).str().c_str());
    }
    return;
  }
  std::printf("\nper transformer layer and step, bytes one rank sends: s = %lld tokens, b = %lld, "
              "h = %lld, p = %lld bytes, T = %d%s, C = %d (x %lld layers)\n",
              static_cast<long long>(c.input.seq_len), static_cast<long long>(c.batch),
              static_cast<long long>(config.n_embd), static_cast<long long>(p),
              layout.tensor_parallel, layout.sequence_parallel ? " with sequence parallelism" : "",
              layout.context_parallel, static_cast<long long>(config.n_layer));
  Table t({"technique", "sent per layer", "formula"}, {0, 2});
  for (const cost::LayerTraffic& r : rows) t.add({r.technique, megabytes(r.bytes), r.formula});
  std::fputs(t.str().c_str(), stdout);
}

// The run's strategy's rows beside what its ledgers counted, and what they counted that no
// formula predicts (the NaN guard's one-scalar all-reduce per step, a ResNet's buffer broadcast).
void compare_with_run(const ModelChoice& c, const std::vector<cost::Transfer>& rows,
                      const MeasuredComm& m, const std::string& strategy, bool json) {
  const auto measured = [&](const std::string& collective) -> const MeasuredCollective* {
    for (const MeasuredCollective& x : m.per_step) {
      if (x.collective == collective) return &x;
    }
    return nullptr;
  };
  // A JSON line's first fields: the run and the collective.
  const auto line = [&](const std::string& collective) {
    json::Object l(kJsonLine);
    l.add("run", m.path).add("strategy", m.strategy).add("compression", m.compression).add("collective", collective);
    return l;
  };
  Table t({"collective", "calls", "measured calls", "sent", "measured sent", "formula"},
          {0, 5});
  std::vector<std::string> predicted;
  for (const cost::Transfer& x : rows) {
    if (x.strategy != strategy) continue;
    predicted.push_back(x.collective);
    const MeasuredCollective* got = measured(x.collective);
    const double calls = got ? got->calls : 0, bytes = got ? got->bytes : 0;
    if (json) {
      std::printf("%s\n", line(x.collective)
                              .add("calls", x.calls)
                              .add("measured_calls", calls)
                              .add("bytes", x.bytes)
                              .add("measured_bytes", bytes)
                              .add("formula", x.formula)
                              .str()
                              .c_str());
    } else {
      t.add({x.collective, std::to_string(x.calls), fixed(calls, 2), megabytes(x.bytes),
             megabytes(bytes), x.formula});
    }
  }
  for (const MeasuredCollective& x : m.per_step) {
    bool known = false;
    for (const std::string& p : predicted) known = known || p == x.collective;
    if (known) continue;
    if (json) {
      std::printf("%s\n", line(x.collective)
                              .add("measured_calls", x.calls)
                              .add("measured_bytes", x.bytes)
                              .add("formula", "none")
                              .str()
                              .c_str());
    } else {
      t.add({x.collective, "-", fixed(x.calls, 2), "-", megabytes(x.bytes),
             "not in the formulas (the NaN guard's scalar, buffers)"});
    }
  }
  if (!json) {
    std::printf("%s\n%s on %d ranks, bytes rank 0 sent per training step: the formula beside "
                "the byte ledgers of %s\n",
                describe(c).c_str(), strategy.c_str(), m.ranks, m.path.c_str());
    std::fputs(t.str().c_str(), stdout);
  }
}

}  // namespace

int comm_command(Flags& flags) {
  if (flags.boolean("help")) {
    std::printf("%s%s  --json             one JSON object per strategy and collective\n"
                "  --plot=FILE.svg    bars grouped by strategy, a bar per collective, each with its\n"
                "                     bytes, on a log scale (SVG written directly)\n",
                kHelp, kModelFlagsHelp);
    return 0;
  }
  cost::TrafficOptions o;
  const std::string run_path = flags.text("run", "");
  std::optional<MeasuredComm> run;
  if (!run_path.empty()) run = read_measured_comm(run_path);
  o.ranks = static_cast<int>(flags.integer("ranks", run ? run->ranks : 0, 1));
  TS_CHECK(o.ranks >= 1, "--ranks is required");
  if (run) {
    TS_CHECK(o.ranks == run->ranks, "--ranks=", o.ranks, " but the run in '",
             run_path, "' had ", run->ranks, " ranks");
    TS_CHECK(run->strategy == "ddp" || run->strategy == "zero1" || run->strategy == "zero2" ||
                 run->strategy == "zero3",
             "--run compares ddp and zero1-3 runs; '", run_path, "' is a ",
             run->strategy, " run");
  }
  o.stages = static_cast<int>(flags.integer("stages", 2, 1));
  o.microbatches = static_cast<int>(flags.integer("micro-batches", 4, 1));
  o.tensor_parallel = static_cast<int>(flags.integer("tensor-parallel", 2, 1));
  o.bucket_cap_mb = flags.number("bucket-cap-mb", 25, 1e-6);
  o.first_bucket_mb = flags.number("first-bucket-mb", 1, 1e-6);
  std::vector<std::string> compressions;
  for (const std::string& s : flags.texts("compression", "none")) {
    if (s == "all") {
      for (const std::string& e : cost::example_compressions()) compressions.push_back(e);
    } else if (s != "none") {
      compressions.push_back(s);
    }
  }
  cost::SequenceLayout layout;
  layout.tensor_parallel = o.tensor_parallel;
  layout.sequence_parallel = flags.boolean("sequence-parallel");
  layout.context_parallel = static_cast<int>(flags.integer("context-parallel", 1, 1));
  const bool json = flags.boolean("json");
  const std::string plot = flags.text("plot", "");
  // A network given: each row's step time too, from the scaling model (cost/scaling.h).
  const bool timed = flags.has("bandwidth-gbps") || flags.has("latency-us");
  cost::Network network;
  network.inter = cost::Link::from(flags.number("latency-us", 5, 0), flags.number("bandwidth-gbps", 100, 1e-9));
  ModelChoice c = read_model_flags(flags);
  if (timed) add_times(flags, c);
  TS_CHECK(c.input.text() || (!layout.sequence_parallel && layout.context_parallel == 1),
           "--sequence-parallel and --context-parallel are a GPT's (--model=gpt-tiny|gpt-nano|"
           "gpt2), not --model=", c.name, "'s");
  flags.check_all_used("comm");
  if (!plot.empty()) check_plot_path(plot);
  if (run) {
    TS_CHECK(c.name == run->model, "--model=", c.name, " but the run in '",
             run_path, "' trained ", run->model);
    TS_CHECK(plot.empty(), "--plot draws the formulas only; drop it with --run");
  }

  auto rows = cost::traffic_per_step(c.profile, c.setup, o);
  for (const std::string& s : compressions) {
    try {
      for (cost::Transfer& t : cost::compressed_ddp_traffic(c.profile, s, o)) rows.push_back(t);
    } catch (const Error& e) {
      TS_CHECK(false, "--compression=", s, ": ", e.message());
    }
  }
  std::map<std::string, std::optional<double>> step;  // per strategy; nullopt: not modelled
  if (timed) {
    TS_CHECK(!run, "--bandwidth-gbps and --latency-us price the formulas' step; drop them with --run");
    for (const cost::Transfer& x : rows) step[x.strategy] = step_seconds(c, o, network, x.strategy);
  }
  if (run) {
    const std::string& used = run->compression;
    TS_CHECK(compressions.empty() || (compressions.size() == 1 && compressions[0] == used),
             "the run in '", run_path, "' trained with --compression=", used,
             "; leave --compression out (the run's is used) or give that one");
    if (used == "none") {
      compare_with_run(c, rows, *run, run->strategy, json);
    } else {
      // The run's compressor's row, unless --compression gave it already.
      if (compressions.empty()) {
        for (cost::Transfer& t : cost::compressed_ddp_traffic(c.profile, used, o)) rows.push_back(t);
      }
      compare_with_run(c, rows, *run, "ddp+" + used, json);
    }
    return 0;
  }
  if (json) {
    for (const cost::Transfer& t : rows) {
      json::Object line(kJsonLine);
      line.add("model", c.name)
          .add("psi", c.profile.parameters())
          .add("ranks", o.ranks)
          .add("batch", c.batch)
          .add("strategy", t.strategy)
          .add("collective", t.collective)
          .add("calls", t.calls)
          .add("bytes", t.bytes)
          .add("formula", t.formula);
      if (timed) {
        // null where the step model has no such strategy (JSON's "none", not a -1).
        const std::optional<double>& seconds = step[t.strategy];
        if (seconds) {
          line.add("step_seconds", *seconds);
        } else {
          line.add_raw("step_seconds", "null");
        }
      }
      std::printf("%s\n", line.str().c_str());
    }
    if (c.input.text()) print_sequence_traffic(c, layout, true);
  } else {
    std::printf("%s\nbytes one rank sends per step: N = %d data-parallel ranks; pipeline K = %d "
                "stages, M = %d micro-batches (one replica); tensor parallel T = %d (one replica)\n",
                describe(c).c_str(), o.ranks, o.stages, o.microbatches, o.tensor_parallel);
    if (timed) {
      std::printf("step ms: explain scaling's model at N = %d, %g us and %g Gb/s (ddp, zero3 and DDP "
                  "under each compressor; '-': not modelled); per-layer times: %s\n",
                  o.ranks, network.inter.latency * 1e6, network.inter.bandwidth * 8 / 1e9,
                  c.profile.times_source.c_str());
    }
    std::vector<std::string> header = {"strategy", "collective", "calls", "sent"};
    if (timed) header.push_back("step ms");
    header.push_back("formula");
    Table t(header, {0, 1, header.size() - 1});
    std::map<std::string, double> total;
    for (const cost::Transfer& x : rows) {
      std::vector<std::string> row = {x.strategy, x.collective, std::to_string(x.calls), megabytes(x.bytes)};
      if (timed) row.push_back(step[x.strategy] ? milliseconds(*step[x.strategy]) : "-");
      row.push_back(x.formula);
      t.add(row);
      total[x.strategy] += x.bytes;
    }
    std::fputs(t.str().c_str(), stdout);
    const double ddp = total["ddp"];
    if (ddp > 0) {
      std::printf("per step: ddp %s, zero1/zero2 %s (%.2fx ddp), zero3 %s (%.2fx ddp)\n",
                  megabytes(ddp).c_str(), megabytes(total["zero1"]).c_str(), total["zero1"] / ddp,
                  megabytes(total["zero3"]).c_str(), total["zero3"] / ddp);
    }
    if (c.input.text()) print_sequence_traffic(c, layout, false);
  }
  if (!plot.empty()) {
    std::ofstream out(plot);
    TS_CHECK(out.good(), "--plot=", plot, ": cannot write the file");
    out << comm_bars_svg(rows, "Bytes sent per rank per step: " + c.name + ", N=" + std::to_string(o.ranks) +
                                   " (log scale)");
    TS_CHECK(out.good(), "--plot=", plot, ": writing failed");
    std::fprintf(stderr, "explain: wrote %s\n", plot.c_str());
  }
  return 0;
}

}  // namespace explain
}  // namespace tessera
