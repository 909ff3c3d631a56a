// explain memory --measure: under mpirun (or one process without), one training step of DDP,
// ZeRO-1/2/3 and (N > 1) a pipeline of N stages on these ranks (memory_measure.h), and per
// strategy and rank the counting allocator's parameters, gradients and optimizer state beside
// cost/memory.h's prediction for this world size (K = N stages), and the step's peak.
#include <cstdio>

#include "cost/memory.h"
#include "dist/environment.h"
#include "tools/explain/commands.h"
#include "tools/explain/gnuplot.h"
#include "tools/explain/json_line.h"
#include "tools/explain/memory_measure.h"
#include "tools/explain/model_flags.h"
#include "tools/explain/table.h"

namespace tessera {
namespace explain {

namespace {

// The formula's row for one rank: the strategy's, or for a pipeline stage the row of the
// parameters its partition gave it (its layers' and its copies of tied ones), since stages cut
// at layers are balanced only as far as the layers allow.
cost::MemoryRow predicted_row(const std::vector<cost::MemoryRow>& rows, const ModelChoice& c,
                              const MeasuredStrategy& s, size_t rank) {
  if (s.strategy == "pipeline") {
    const int64_t held = s.ranks[rank].stage_parameters;
    cost::MemoryRow row = cost::pipeline_stage_row(held, c.setup, static_cast<int>(s.ranks.size()));
    row.formula += ", psi_k = " + std::to_string(held);
    return row;
  }
  for (const cost::MemoryRow& r : rows) {
    if (r.strategy == s.strategy) return r;
  }
  TS_CHECK(false, "no prediction for ", s.strategy);
  return rows.front();
}

void print(const ModelChoice& c, int world, const std::vector<MeasuredStrategy>& measured,
           const std::vector<cost::MemoryRow>& rows, bool json) {
  if (json) {
    for (const MeasuredStrategy& s : measured) {
      for (size_t rank = 0; rank < s.ranks.size(); ++rank) {
        const RankMemory& m = s.ranks[rank];
        const cost::MemoryRow p = predicted_row(rows, c, s, rank);
        std::printf("%s\n", json::Object(kJsonLine)
                                .add("model", c.name)
                                .add("data", c.input.name)
                                .add("psi", c.profile.parameters())
                                .add("optimizer", cost::optimizer_name(c.setup.optimizer))
                                .add("precision", cost::precision_name(c.setup.precision))
                                .add("ranks", world)
                                .add("strategy", s.strategy)
                                .add("rank", static_cast<int64_t>(rank))
                                .add("parameters_bytes", m.model_states.parameters)
                                .add("gradients_bytes", m.model_states.gradients)
                                .add("optimizer_bytes", m.model_states.optimizer)
                                .add("total_bytes", m.model_states.total())
                                .add("peak_bytes", m.peak_bytes)
                                .add("predicted_parameters_bytes", p.bytes.parameters)
                                .add("predicted_gradients_bytes", p.bytes.gradients)
                                .add("predicted_optimizer_bytes", p.bytes.optimizer)
                                .add("predicted_total_bytes", p.bytes.total())
                                .add("formula", p.formula)
                                .add("stage_parameters", m.stage_parameters)
                                .str()
                                .c_str());
      }
    }
    return;
  }
  std::printf("%s\nmodel states per rank on N = %d rank%s, measured (the counting allocator, after "
              "backward in the second step) / predicted (the formula); peak: the allocator's during "
              "that step, activations included\n",
              describe(c).c_str(), world, world == 1 ? "" : "s");
  Table t({"strategy", "rank", "parameters", "gradients", "optimizer", "total", "peak", "formula"},
          {0, 7});
  auto pair = [](int64_t measured, int64_t predicted) {
    return megabytes(static_cast<double>(measured)) + " / " + megabytes(static_cast<double>(predicted));
  };
  for (const MeasuredStrategy& s : measured) {
    for (size_t rank = 0; rank < s.ranks.size(); ++rank) {
      const RankMemory& m = s.ranks[rank];
      const cost::MemoryRow p = predicted_row(rows, c, s, rank);
      t.add({s.strategy, std::to_string(rank), pair(m.model_states.parameters, p.bytes.parameters),
             pair(m.model_states.gradients, p.bytes.gradients),
             pair(m.model_states.optimizer, p.bytes.optimizer),
             pair(m.model_states.total(), p.bytes.total()),
             megabytes(static_cast<double>(m.peak_bytes)), p.formula});
    }
  }
  std::fputs(t.str().c_str(), stdout);
}

// Measured beside predicted model states, a pair of bars per strategy and rank.
void plot(const ModelChoice& c, int world, const std::vector<MeasuredStrategy>& measured,
          const std::vector<cost::MemoryRow>& rows, const std::string& path) {
  std::string script = gnuplot_preamble(
      path, 900, 450,
      "Model states per rank, measured and predicted: " + c.name + ", N=" + std::to_string(world) +
          ", " + cost::precision_name(c.setup.precision) + ", " + cost::optimizer_name(c.setup.optimizer));
  script += "$data << EOD\n";
  for (const MeasuredStrategy& s : measured) {
    for (size_t rank = 0; rank < s.ranks.size(); ++rank) {
      const cost::MemoryRow p = predicted_row(rows, c, s, rank);
      script += s.strategy + "/" + std::to_string(rank) + " " +
                std::to_string(s.ranks[rank].model_states.total() / 1e6) + " " +
                std::to_string(p.bytes.total() / 1e6) + "\n";
    }
  }
  script +=
      "EOD\n"
      "set style data histograms\nset style histogram clustered gap 1\n"
      "set style fill solid 0.85 border -1\nset ylabel 'MB per rank (strategy/rank)'\n"
      "set yrange [0:*]\nset key top right\nset xtics rotate by -30 left\nset bmargin 6\n"
      "plot $data using 2:xtic(1) title 'measured (counting allocator)', '' using 3 title "
      "'predicted (formula)'\n";
  run_gnuplot(script, path);
}

}  // namespace

int memory_measure_command(Flags& flags) {
  const bool json = flags.boolean("json");
  const int64_t ranks = flags.integer("ranks", 0, 1);
  const std::string plot_path = flags.text("plot", "");
  ModelChoice c = read_model_flags(flags);
  flags.check_all_used("memory --measure");
  if (!plot_path.empty()) check_plot_path(plot_path);
  c.model.reset();  // not counted in the measured steps' peaks
  const std::shared_ptr<dist::ProcessGroup> world = dist::init();
  const int code = dist::run_or_abort([&] {
    TS_CHECK(ranks == 0 || ranks == world->size(), "--ranks=", ranks, ": --measure runs on the ",
             world->size(), " rank", world->size() == 1 ? "" : "s", " it was started on (mpirun -np N "
             "explain memory --measure ...; leave out --ranks)");
    const std::vector<MeasuredStrategy> measured =
        measure_model_states(c.name, c.input, c.batch, c.setup, world);
    const std::vector<cost::MemoryRow> rows = cost::memory_per_rank(
        c.profile.parameters(), c.profile.tensor_parallel_parameters, c.profile.tied_parameters,
        c.setup, world->size(), world->size(), world->size());
    if (world->rank() == 0) {
      print(c, world->size(), measured, rows, json);
      if (!plot_path.empty()) plot(c, world->size(), measured, rows, plot_path);
    }
    return 0;
  });
  dist::finalize();
  return code;
}

}  // namespace explain
}  // namespace tessera
