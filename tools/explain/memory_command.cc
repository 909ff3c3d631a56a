// explain memory: the ZeRO paper's table for a real model at any N (cost/memory.h): parameters,
// gradients and optimizer state per rank under DDP, ZeRO-1, 2 and 3, a pipeline stage and a
// tensor-parallel rank, each beside its formula; for a GPT also its activations per layer,
// predicted beside measured (activation_table.h).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "cost/memory.h"
#include "cost/offload.h"
#include "cost/sequence_layout.h"
#include "dist/environment.h"
#include "tools/explain/activation_table.h"
#include "tools/explain/commands.h"
#include "tools/explain/gnuplot.h"
#include "tools/explain/json_line.h"
#include "tools/explain/model_flags.h"
#include "tools/explain/table.h"

namespace tessera {
namespace explain {

namespace {

const char* const kHelp =
    "usage: explain memory --model=M --ranks=N [--precision=f32|mixed] [--optimizer=sgd|adam]\n"
    "                      [--stages=K] [--tensor-parallel=T] [--strategy=S,...] [--json] [--plot=FILE.svg]\n"
    "                      [--offload=optimizer|all]\n"
    "       explain memory --params=P --ranks=N [--precision=f32|mixed] [--optimizer=sgd|adam]\n"
    "                      [--stages=K] [--strategy=S,...] [--json] [--plot=FILE.svg]\n"
    "       [mpirun -np N] explain memory --measure --model=M [--precision=f32|mixed]\n"
    "                      [--optimizer=sgd|adam] [--json] [--plot=FILE.svg]\n"
    "Model-state bytes per rank (parameters, gradients, optimizer state; activations not counted):\n"
    "DDP and ZeRO-1/2/3 over N data-parallel ranks, one stage of a K-stage pipeline (stages\n"
    "balanced by parameters), one rank of T-way tensor parallelism, each beside its formula\n"
    "(psi parameters; the ZeRO paper's table; dist/zero/memory_model.h). For a GPT also the\n"
    "activations per layer at --batch and --seq-len: tessera's formula, the counting\n"
    "allocator's measurement (a forward here) and Korthikanti et al. 2022's 16-bit figure.\n"
    "  --ranks=N          data-parallel ranks (required)\n"
    "  --params=P         a model of P parameters (7.5e9), in place of --model: the ZeRO paper's\n"
    "                     own table (its ZeRO-2 keeps 16-bit shard gradients; tessera's, f32)\n"
    "  --strategy=S,...   only these rows: ddp, zero1, zero2, zero3, pipeline, tensor_parallel\n"
    "                     (default all)\n"
    "  --stages=K         pipeline stages (default 2)\n"
    "  --tensor-parallel=T  tensor-parallel ranks (default 2)\n"
    "  --offload=O        also what ZeRO-Offload / ZeRO-Infinity keep resident and offload per\n"
    "                     ZeRO row, and read and write per step (cost/offload.h): optimizer\n"
    "                     (ZeRO-1/2/3) or all (ZeRO-3; the train tool's --offload)\n"
    "  --measure          one real training step of DDP, ZeRO-1, ZeRO-2, ZeRO-3 and (N > 1) a\n"
    "                     pipeline of N stages and T = N tensor parallelism on the N ranks started\n"
    "                     (mixed: bf16 parameters, f32 masters; --batch examples per rank): per\n"
    "                     rank the counting allocator's parameters, gradients, optimizer state and\n"
    "                     peak beside the prediction\n"
    "A GPT's activation table is one rank's of a long-sequence layout (docs/SEQUENCE.md) when any\n"
    "of these is given, measured when started on T x C ranks (mpirun -np T*C explain memory ...):\n"
    "  --tensor-parallel=T  (given) Megatron-LM's tensor parallelism of the blocks and vocabulary\n"
    "  --sequence-parallel  and its sequence parallelism\n"
    "  --context-parallel=C ring attention over C ranks (head-tail chunks)\n";

// The rows `shown` names ("all": every one), in the table's order; an unknown name is an error
// listing the rows there are.
std::vector<cost::MemoryRow> chosen(const std::vector<cost::MemoryRow>& rows,
                                    const std::vector<std::string>& shown) {
  if (shown == std::vector<std::string>{"all"}) return rows;
  std::string names;
  for (const cost::MemoryRow& r : rows) names += (names.empty() ? "" : ", ") + r.strategy;
  for (const std::string& name : shown) {
    const bool known = std::any_of(rows.begin(), rows.end(),
                                   [&](const cost::MemoryRow& r) { return r.strategy == name; });
    TS_CHECK(known, "--strategy=", name, ": not a row of this table (", names, ", or all)");
  }
  std::vector<cost::MemoryRow> out;
  for (const cost::MemoryRow& r : rows) {
    if (std::find(shown.begin(), shown.end(), r.strategy) != shown.end()) out.push_back(r);
  }
  return out;
}

// GB (10^9 bytes) when the largest total reaches one, else MB.
struct Unit {
  const char* name;
  double bytes;
};
Unit unit_for(const std::vector<cost::MemoryRow>& rows) {
  int64_t largest = 0;
  for (const cost::MemoryRow& r : rows) largest = std::max(largest, r.bytes.total());
  return largest >= 1000000000 ? Unit{"GB", 1e9} : Unit{"MB", 1e6};
}

void print_json(const std::string& model, const std::string& data, int64_t psi,
                const cost::TrainingSetup& setup, const std::vector<cost::MemoryRow>& rows) {
  for (const cost::MemoryRow& r : rows) {
    std::printf("%s\n", json::Object(kJsonLine)
                            .add("model", model)
                            .add("data", data)
                            .add("psi", psi)
                            .add("precision", cost::precision_name(setup.precision))
                            .add("optimizer", cost::optimizer_name(setup.optimizer))
                            .add("strategy", r.strategy)
                            .add("divisor", r.divisor)
                            .add("parameters_bytes", r.bytes.parameters)
                            .add("gradients_bytes", r.bytes.gradients)
                            .add("optimizer_bytes", r.bytes.optimizer)
                            .add("total_bytes", r.bytes.total())
                            .add("formula", r.formula)
                            .str()
                            .c_str());
  }
}

// --offload: per ZeRO row that offloads, what stays and what moves each step.
void print_offload(const std::vector<cost::OffloadRow>& rows, const std::string& offload, bool json,
                   const std::string& model) {
  if (json) {
    for (const cost::OffloadRow& r : rows) {
      std::printf("%s\n", json::Object(kJsonLine)
                              .add("model", model)
                              .add("strategy", r.strategy)
                              .add("offload", offload)
                              .add("resident_bytes", r.resident)
                              .add("offloaded_bytes", r.offloaded)
                              .add("read_bytes_per_step", r.read_per_step)
                              .add("written_bytes_per_step", r.written_per_step)
                              .add("formula", r.formula)
                              .str()
                              .c_str());
    }
    return;
  }
  int64_t largest = 0;
  for (const cost::OffloadRow& r : rows) largest = std::max(largest, r.read_per_step);
  const Unit u = largest >= 1000000000 ? Unit{"GB", 1e9} : Unit{"MB", 1e6};
  const auto shown = [&](int64_t bytes) { return fixed(bytes / u.bytes, 3) + " " + u.name; };
  std::printf("\n--offload=%s (to host memory or disk: the same bytes), per rank:\n", offload.c_str());
  Table t({"strategy", "resident", "offloaded", "read/step", "written/step", "formula"}, {0, 5});
  for (const cost::OffloadRow& r : rows) {
    t.add({r.strategy, shown(r.resident), shown(r.offloaded), shown(r.read_per_step),
           shown(r.written_per_step), r.formula});
  }
  std::fputs(t.str().c_str(), stdout);
}

void print_table(const std::vector<cost::MemoryRow>& rows) {
  const Unit u = unit_for(rows);
  const auto shown = [&](int64_t bytes) { return fixed(bytes / u.bytes, 3) + " " + u.name; };
  Table t({"strategy", "over", "parameters", "gradients", "optimizer", "total", "formula"}, {0, 6});
  for (const cost::MemoryRow& r : rows) {
    t.add({r.strategy, std::to_string(r.divisor), shown(r.bytes.parameters), shown(r.bytes.gradients),
           shown(r.bytes.optimizer), shown(r.bytes.total()), r.formula});
  }
  std::fputs(t.str().c_str(), stdout);
}

// Stacked bars per strategy (parameters, gradients, optimizer state), each bar's total written
// above it and each part's value inside it where it is tall enough to hold one; the legend
// outside the plot, right, so that no bar hides under it.
void plot_rows(const std::vector<cost::MemoryRow>& rows, const std::string& title,
               const std::string& plot) {
  const Unit u = unit_for(rows);
  int64_t largest = 1;
  for (const cost::MemoryRow& r : rows) largest = std::max(largest, r.bytes.total());
  std::string script = gnuplot_preamble(plot, 900, 450, title);
  script += "$data << EOD\n";
  for (const cost::MemoryRow& r : rows) {
    script += r.strategy + " " + std::to_string(r.bytes.parameters / u.bytes) + " " +
              std::to_string(r.bytes.gradients / u.bytes) + " " +
              std::to_string(r.bytes.optimizer / u.bytes) + "\n";
  }
  // A part's label only where the part is at least 6% of the tallest bar (else it would not fit).
  const std::string tall = std::to_string(0.06 * largest / u.bytes);
  script +=
      "EOD\n"
      "set style data histograms\nset style histogram rowstacked\n"
      "set style fill solid 0.85 border -1\nset boxwidth 0.6\n"
      "set ylabel '" + std::string(u.name) + " per rank'\nset yrange [0:" +
      std::to_string(1.12 * largest / u.bytes) + "]\nset key outside right top\n"
      "set rmargin 20\n"
      "plot $data using 2:xtic(1) title 'parameters', '' using 3 title 'gradients', "
      "'' using 4 title 'optimizer state', "
      "'' using 0:($2/2):($2 >= " + tall + " ? sprintf('%.3g', $2) : '') with labels tc rgb 'white' notitle, "
      "'' using 0:($2+$3/2):($3 >= " + tall + " ? sprintf('%.3g', $3) : '') with labels tc rgb 'white' notitle, "
      "'' using 0:($2+$3+$4/2):($4 >= " + tall + " ? sprintf('%.3g', $4) : '') with labels tc rgb 'white' notitle, "
      "'' using 0:($2+$3+$4):(sprintf('%.3g " + u.name + "', $2+$3+$4)) with labels offset 0,0.8 notitle\n";
  run_gnuplot(script, plot);
}

// --params=N: a model known only by its size, priced by the paper's table.
int params_command(Flags& flags, int ranks, int stages, const std::vector<std::string>& shown) {
  const double params = flags.number("params", 0, 1);
  TS_CHECK(!flags.has("model"), "--params=", flags.text("params", ""), " and --model=",
           flags.text("model", ""), ": give one of them (a model's size, or the model)");
  TS_CHECK(params <= 9.2e18, "--params=", params, ": too many parameters");
  const int64_t psi = static_cast<int64_t>(std::llround(params));
  cost::TrainingSetup setup;
  setup.precision = parsed("precision", flags.text("precision", "f32"), cost::parse_precision);
  setup.optimizer = parsed("optimizer", flags.text("optimizer", "adam"), cost::parse_optimizer);
  const bool json = flags.boolean("json");
  const std::string plot = flags.text("plot", "");
  flags.check_all_used("memory");
  if (!plot.empty()) check_plot_path(plot);
  const auto rows = chosen(cost::paper_memory_per_rank(psi, setup, ranks, stages), shown);
  if (json) {
    print_json("-", "-", psi, setup, rows);
  } else {
    std::printf("a model of psi = %s parameters, %s, %s: model states per rank as the ZeRO paper "
                "counts them (Rajbhandari et al. 2020, figure 1), N = %d data-parallel ranks, K = "
                "%d pipeline stages\n",
                with_commas(psi).c_str(), cost::precision_name(setup.precision),
                cost::optimizer_name(setup.optimizer), ranks, stages);
    print_table(rows);
  }
  if (!plot.empty()) {
    char title[200];
    std::snprintf(title, sizeof(title), "Model states per rank: %.3g parameters, N=%d, %s, %s",
                  static_cast<double>(psi), ranks, cost::precision_name(setup.precision),
                  cost::optimizer_name(setup.optimizer));
    plot_rows(rows, title, plot);
  }
  return 0;
}

}  // namespace

int memory_command(Flags& flags) {
  if (flags.boolean("help")) {
    std::printf("%s%s  --json             one JSON object per strategy (--measure: and rank)\n"
                "  --plot=FILE.svg    stacked bars per strategy (--measure: measured beside\n"
                "                     predicted per strategy and rank) (gnuplot)\n",
                kHelp, kModelFlagsHelp);
    return 0;
  }
  if (flags.boolean("measure")) {
    TS_CHECK(!flags.has("params"), "--params describes a model by its size alone; --measure "
             "trains a real one: give --model");
    return memory_measure_command(flags);
  }
  const int ranks = static_cast<int>(flags.integer("ranks", 0, 1));
  TS_CHECK(ranks >= 1, "--ranks is required");
  const int stages = static_cast<int>(flags.integer("stages", 2, 1));
  const std::vector<std::string> shown = flags.texts("strategy", "all");
  if (flags.has("params")) return params_command(flags, ranks, stages, shown);
  cost::SequenceLayout layout;
  const bool tp_given = flags.has("tensor-parallel");
  const int tp = static_cast<int>(flags.integer("tensor-parallel", 2, 1));
  layout.tensor_parallel = tp_given ? tp : 1;
  layout.sequence_parallel = flags.boolean("sequence-parallel");
  layout.context_parallel = static_cast<int>(flags.integer("context-parallel", 1, 1));
  const bool json = flags.boolean("json");
  const std::string plot = flags.text("plot", "");
  const std::string offload = flags.text("offload", "none");
  TS_CHECK(offload == "none" || offload == "optimizer" || offload == "all", "--offload=", offload,
           ": expected optimizer or all (none: leave the flag out)");
  ModelChoice c = read_model_flags(flags);
  flags.check_all_used("memory");
  if (!plot.empty()) check_plot_path(plot);
  TS_CHECK(c.input.text() || (!layout.sequence_parallel && layout.context_parallel == 1),
           "--sequence-parallel and --context-parallel are a GPT's (--model=gpt-tiny|gpt-nano|"
           "gpt2), not --model=", c.name, "'s");
  TS_CHECK(!layout.sequence_parallel || layout.tensor_parallel > 1,
           "--sequence-parallel splits tensor parallelism's LayerNorm regions: give "
           "--tensor-parallel=T with T > 1");
  // Under mpirun (a layout of several ranks, measured), rank 0 prints.
  std::shared_ptr<dist::ProcessGroup> world;
  if (c.input.text() && layout.ranks() > 1) world = dist::init();
  const bool printing = world == nullptr || world->rank() == 0;

  const int64_t psi = c.profile.parameters();
  const auto rows = chosen(cost::memory_per_rank(psi, c.profile.tensor_parallel_parameters,
                                                 c.profile.tied_parameters, c.setup, ranks, stages, tp),
                           shown);
  if (!printing) {
  } else if (json) {
    print_json(c.name, c.input.name, psi, c.setup, rows);
  } else {
    std::printf("%s\nmodel states per rank: N = %d data-parallel ranks, K = %d pipeline stages, "
                "T = %d tensor-parallel ranks (psi_s = %s split)\n",
                describe(c).c_str(), ranks, stages, tp,
                with_commas(c.profile.tensor_parallel_parameters).c_str());
    print_table(rows);
  }
  if (offload != "none" && printing) {
    print_offload(cost::offload_rows(rows, offload, psi, c.setup, ranks), offload, json, c.name);
  }
  if (c.input.text()) {
    if (world == nullptr) {
      print_activations(c, layout, json, nullptr);
    } else {
      const int code = dist::run_or_abort([&] {
        print_activations(c, layout, json, world);
        return 0;
      });
      dist::finalize();
      if (code != 0) return code;
    }
  }
  if (!plot.empty() && printing) {
    plot_rows(rows, "Model states per rank: " + c.name + ", N=" + std::to_string(ranks) + ", " +
                        cost::precision_name(c.setup.precision) + ", " +
                        cost::optimizer_name(c.setup.optimizer),
              plot);
  }
  return 0;
}

}  // namespace explain
}  // namespace tessera
