// explain curves: training curves of one or more runs from their --metrics files (train
// --metrics=FILE): a table per run (steps, final loss, best accuracy, mean images/s) and, with
// --plot, loss, test accuracy, loss scale and images/s against the step or the elapsed time,
// one panel each, the runs overlaid.
#include <cstdio>

#include "tools/explain/commands.h"
#include "tools/explain/curves_plot.h"
#include "tools/explain/gnuplot.h"
#include "tools/explain/json_line.h"
#include "tools/explain/metrics_runs.h"
#include "tools/explain/table.h"

namespace tessera {
namespace explain {

namespace {

const char* const kHelp =
    "usage: explain curves --metrics=A.jsonl[,B.jsonl...] [--x=step|time]\n"
    "                      [--show=loss,accuracy,loss-scale,throughput] [--json] [--plot=FILE.svg]\n"
    "Training curves of one or more runs, read from the JSON lines train --metrics=FILE writes (a\n"
    "line per step and per epoch): per run the steps, the final loss, the best test accuracy and the\n"
    "mean images/s; with --plot the curves, the runs overlaid.\n"
    "  --metrics=FILES      the runs' --metrics files, comma-separated (required)\n"
    "  --x=step|time        the horizontal axis: optimizer step (default) or seconds since the run\n"
    "                       began training\n"
    "  --show=Q1,Q2,...     the panels: loss (each step's, rank 0's batch), accuracy (test, at epoch\n"
    "                       ends), loss-scale (fp16 runs), throughput (images/s of each step);\n"
    "                       default: those every run has. A run without a quantity asked for is an\n"
    "                       error\n"
    "  --label=A,B,...      the runs' names in the table and the legend, one per --metrics file\n"
    "                       (default: the file names)\n"
    "  --json               one JSON object per run (with its label, if given)\n"
    "  --plot=FILE.svg      one picture, a panel per quantity, a line per run (gnuplot)\n";

std::vector<std::string> split_commas(const std::string& v) {
  std::vector<std::string> out;
  size_t at = 0;
  for (;;) {
    const size_t comma = v.find(',', at);
    out.push_back(v.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (comma == std::string::npos) return out;
    at = comma + 1;
  }
}

std::string optional_fixed(const std::optional<double>& v, int digits) {
  return v ? fixed(*v, digits) : "-";
}

}  // namespace

int curves_command(Flags& flags) {
  if (flags.boolean("help")) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  const std::string files = flags.required("metrics");
  const std::string x = flags.text("x", "step");
  TS_CHECK(x == "step" || x == "time", "--x=", x, ": expected step or time");
  const std::string show = flags.text("show", "");
  const std::string labels = flags.text("label", "");
  const bool json = flags.boolean("json");
  const std::string plot = flags.text("plot", "");
  flags.check_all_used("curves");
  if (!plot.empty()) check_plot_path(plot);

  std::vector<MetricsRun> runs;
  for (const std::string& path : split_commas(files)) {
    TS_CHECK(!path.empty(), "--metrics=", files, ": an empty file name in the list");
    runs.push_back(read_metrics(path));
  }
  if (!labels.empty()) {
    const std::vector<std::string> names = split_commas(labels);
    TS_CHECK(names.size() == runs.size(), "--label=", labels, ": ", names.size(), " label(s) for ",
             runs.size(), " run(s) of --metrics=", files);
    for (size_t i = 0; i < runs.size(); ++i) {
      TS_CHECK(!names[i].empty(), "--label=", labels, ": an empty label in the list");
      runs[i].label = names[i];
    }
  }
  // The panels: as asked (every run must have each), or what every run has.
  std::vector<Quantity> quantities;
  if (!show.empty()) {
    for (const std::string& name : split_commas(show)) {
      const Quantity q = parsed("show", show, [&](const std::string&) { return parse_quantity(name); });
      for (const MetricsRun& r : runs) {
        TS_CHECK(r.has(q), "--show=", show, ": ", r.path, " has no ", quantity_label(q), " (",
                 missing_reason(q), ")");
      }
      quantities.push_back(q);
    }
  } else {
    for (Quantity q : all_quantities()) {
      bool everyone = true;
      for (const MetricsRun& r : runs) everyone = everyone && r.has(q);
      if (everyone) quantities.push_back(q);
    }
  }

  if (json) {
    for (const MetricsRun& r : runs) {
      const RunSummary s = summarize(r);
      json::Object line(kJsonLine);
      line.add("run", r.path);
      if (!r.label.empty()) line.add("label", r.label);
      line
          .add("steps", s.steps)
          .add("epochs", s.epochs)
          .add("last_step", s.last_step)
          .add("elapsed_seconds", s.elapsed_seconds)
          .add("final_loss", s.final_loss)
          .add("mean_images_per_second", s.mean_images_per_second);
      if (s.final_train_loss) line.add("final_train_loss", *s.final_train_loss);
      if (s.best_accuracy) line.add("best_accuracy", *s.best_accuracy);
      std::printf("%s\n", line.str().c_str());
    }
  } else {
    Table t({"run", "steps", "epochs", "last step", "seconds", "final loss", "final epoch loss",
             "best accuracy", "mean images/s"});
    for (const MetricsRun& r : runs) {
      const RunSummary s = summarize(r);
      t.add({r.label.empty() ? r.path : r.label, std::to_string(s.steps), std::to_string(s.epochs), fixed(s.last_step, 0),
             fixed(s.elapsed_seconds, 2), fixed(s.final_loss, 4),
             optional_fixed(s.final_train_loss, 4), optional_fixed(s.best_accuracy, 4),
             fixed(s.mean_images_per_second, 1)});
    }
    std::fputs(t.str().c_str(), stdout);
  }
  if (!plot.empty()) plot_curves(runs, quantities, x == "time", plot);
  return 0;
}

}  // namespace explain
}  // namespace tessera
