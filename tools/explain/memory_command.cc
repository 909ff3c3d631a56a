// explain memory: the ZeRO paper's table for a real model at any N (cost/memory.h): parameters,
// gradients and optimizer state per rank under DDP, ZeRO-1, 2 and 3, a pipeline stage and a
// tensor-parallel rank, each beside its formula; for a GPT also its activations per layer,
// predicted beside measured (activation_table.h).
#include <cstdio>

#include "cost/memory.h"
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
    "                      [--stages=K] [--tensor-parallel=T] [--json] [--plot=FILE.svg]\n"
    "       [mpirun -np N] explain memory --measure --model=M [--precision=f32|mixed]\n"
    "                      [--optimizer=sgd|adam] [--json] [--plot=FILE.svg]\n"
    "Model-state bytes per rank (parameters, gradients, optimizer state; activations not counted):\n"
    "DDP and ZeRO-1/2/3 over N data-parallel ranks, one stage of a K-stage pipeline (stages\n"
    "balanced by parameters), one rank of T-way tensor parallelism, each beside its formula\n"
    "(psi parameters; the ZeRO paper's table; dist/zero/memory_model.h). For a GPT also the\n"
    "activations per layer at --batch and --seq-len: tessera's formula, the counting\n"
    "allocator's measurement (a forward here) and Korthikanti et al. 2022's 16-bit figure.\n"
    "  --ranks=N          data-parallel ranks (required)\n"
    "  --stages=K         pipeline stages (default 2)\n"
    "  --tensor-parallel=T  tensor-parallel ranks (default 2)\n"
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

}  // namespace

int memory_command(Flags& flags) {
  if (flags.boolean("help")) {
    std::printf("%s%s  --json             one JSON object per strategy (--measure: and rank)\n"
                "  --plot=FILE.svg    stacked bars per strategy (--measure: measured beside\n"
                "                     predicted per strategy and rank) (gnuplot)\n",
                kHelp, kModelFlagsHelp);
    return 0;
  }
  if (flags.boolean("measure")) return memory_measure_command(flags);
  const int ranks = static_cast<int>(flags.integer("ranks", 0, 1));
  TS_CHECK(ranks >= 1, "--ranks is required");
  const int stages = static_cast<int>(flags.integer("stages", 2, 1));
  cost::SequenceLayout layout;
  const bool tp_given = flags.has("tensor-parallel");
  const int tp = static_cast<int>(flags.integer("tensor-parallel", 2, 1));
  layout.tensor_parallel = tp_given ? tp : 1;
  layout.sequence_parallel = flags.boolean("sequence-parallel");
  layout.context_parallel = static_cast<int>(flags.integer("context-parallel", 1, 1));
  const bool json = flags.boolean("json");
  const std::string plot = flags.text("plot", "");
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
  const auto rows = cost::memory_per_rank(psi, c.profile.tensor_parallel_parameters, c.setup, ranks,
                                          stages, tp);
  if (!printing) {
  } else if (json) {
    for (const cost::MemoryRow& r : rows) {
      std::printf("%s\n", json::Object(kJsonLine)
                              .add("model", c.name)
                              .add("data", c.input.name)
                              .add("psi", psi)
                              .add("precision", cost::precision_name(c.setup.precision))
                              .add("optimizer", cost::optimizer_name(c.setup.optimizer))
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
  } else {
    std::printf("%s\nmodel states per rank: N = %d data-parallel ranks, K = %d pipeline stages, "
                "T = %d tensor-parallel ranks (psi_s = %s split)\n",
                describe(c).c_str(), ranks, stages, tp,
                with_commas(c.profile.tensor_parallel_parameters).c_str());
    Table t({"strategy", "over", "parameters", "gradients", "optimizer", "total", "formula"}, {0, 6});
    for (const cost::MemoryRow& r : rows) {
      t.add({r.strategy, std::to_string(r.divisor), megabytes(r.bytes.parameters),
             megabytes(r.bytes.gradients), megabytes(r.bytes.optimizer), megabytes(r.bytes.total()),
             r.formula});
    }
    std::fputs(t.str().c_str(), stdout);
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
    std::string script = gnuplot_preamble(plot, 800, 450,
                                          "Model states per rank: " + c.name + ", N=" +
                                              std::to_string(ranks) + ", " +
                                              cost::precision_name(c.setup.precision) + ", " +
                                              cost::optimizer_name(c.setup.optimizer));
    script += "$data << EOD\n";
    for (const cost::MemoryRow& r : rows) {
      script += r.strategy + " " + std::to_string(r.bytes.parameters / 1e6) + " " +
                std::to_string(r.bytes.gradients / 1e6) + " " + std::to_string(r.bytes.optimizer / 1e6) + "\n";
    }
    script +=
        "EOD\n"
        "set style data histograms\nset style histogram rowstacked\n"
        "set style fill solid 0.85 border -1\nset boxwidth 0.6\n"
        "set ylabel 'MB per rank'\nset yrange [0:*]\nset key top right\n"
        "plot $data using 2:xtic(1) title 'parameters', '' using 3 title 'gradients', "
        "'' using 4 title 'optimizer state'\n";
    run_gnuplot(script, plot);
  }
  return 0;
}

}  // namespace explain
}  // namespace tessera
