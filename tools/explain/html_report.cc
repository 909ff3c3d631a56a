#include "tools/explain/html_report.h"

#include <cstdio>
#include <sstream>

#include "tensor/check.h"
#include "tools/explain/metrics_runs.h"
#include "tools/explain/svg_bars.h"
#include "tools/explain/svg_curves.h"
#include "tools/explain/svg_grid.h"
#include "tools/explain/trace_events.h"
#include "tools/explain/trace_view.h"

namespace tessera {
namespace explain {

namespace {

const char* const kStyle =
    "body{font-family:sans-serif;margin:24px 32px;color:#222;max-width:1200px}"
    "h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ccc}"
    "table{border-collapse:collapse;font-size:13px}td,th{padding:2px 10px;text-align:left}"
    "tr:nth-child(even){background:#f4f4f4}pre{background:#f4f4f4;padding:8px;white-space:pre-wrap}"
    ".missing{color:#777;font-style:italic}.figure{overflow-x:auto}";

// An SVG document as an element of the page: its XML declaration dropped.
std::string inline_svg(const std::string& svg) {
  const size_t start = svg.find("<svg");
  return "<div class=\"figure\">" + (start == std::string::npos ? svg : svg.substr(start)) + "</div>\n";
}

std::string missing(const std::string& why) { return "<p class=\"missing\">" + xml_escaped(why) + "</p>\n"; }

std::string mb(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f MB", bytes / 1e6);
  return buf;
}

// "8 B", "407.1 kB", "1.234 MB" (powers of 10).
std::string bytes_text(double bytes) {
  char buf[32];
  if (bytes < 1e3) {
    std::snprintf(buf, sizeof buf, "%.0f B", bytes);
  } else if (bytes < 1e6) {
    std::snprintf(buf, sizeof buf, "%.1f kB", bytes / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.3f MB", bytes / 1e6);
  }
  return buf;
}

std::string curves_section(const RunDirectory& run) {
  if (run.metrics.empty()) return missing("No --metrics file in this run (train --metrics=RUN/metrics.jsonl writes one).");
  std::vector<MetricsRun> runs;
  std::vector<std::string> names;
  std::string unreadable;  // files with no curve to draw, each saying why
  for (const std::string& path : run.metrics) {
    try {
      runs.push_back(read_metrics(path));
      names.push_back(path.substr(path.find_last_of('/') + 1));
    } catch (const Error& e) {  // no step lines: rank 0 was asynchronous SGD's server, say
      unreadable += missing(e.message());
    }
  }
  if (runs.empty()) return unreadable;
  std::vector<CurvePanel> panels;
  for (Quantity q : {Quantity::kLoss, Quantity::kAccuracy}) {
    CurvePanel panel{quantity_label(q), false, {}};
    for (const MetricsRun& r : runs) {
      panel.lines.push_back(r.has(q) ? r.curve(q, false) : std::vector<CurvePoint>{});
    }
    panels.push_back(panel);
  }
  std::string out = inline_svg(curves_svg(panels, names, "step", "loss per step, test accuracy per epoch"));
  for (const MetricsRun& r : runs) {
    if (!r.has(Quantity::kAccuracy)) out += missing(r.path + ": " + missing_reason(Quantity::kAccuracy));
  }
  return out + unreadable;
}

std::string timeline_section(const RunDirectory& run) {
  if (run.traces.empty()) return missing("No trace in this run (train --trace=RUN/trace.json records one).");
  std::string out;
  for (const std::string& path : run.traces) {
    Trace trace;
    try {
      trace = read_trace(path);
    } catch (const Error& e) {  // a trace with no events, say: the page says so
      out += missing(e.message());
      continue;
    }
    const int64_t step = trace.steps.back();
    out += inline_svg(step_timeline_svg(trace, step, "step " + std::to_string(step) + " of " +
                                                         std::to_string(trace.ranks) + " ranks (" +
                                                         path.substr(path.find_last_of('/') + 1) + ")"));
  }
  return out;
}

std::string memory_section(const RunSummaryLine& s) {
  if (s.memory_per_rank.empty()) return missing("The run's final JSON line has no per-rank memory.");
  BarChart c;
  c.title = "model states per rank, measured beside the formula, and the allocator's peak";
  c.y_label = "MB";
  c.series = {"measured model states", "predicted model states", "peak during the step"};
  c.values.resize(3);
  c.labels.resize(3);
  for (const RankModelStates& r : s.memory_per_rank) {
    c.groups.push_back("rank " + std::to_string(r.rank));
    const double predicted = s.model_state_predicted ? static_cast<double>(*s.model_state_predicted) : -1;
    const double values[] = {static_cast<double>(r.model_state), predicted, static_cast<double>(r.peak)};
    for (int k = 0; k < 3; ++k) {
      c.values[k].push_back(values[k] < 0 ? -1 : values[k] / 1e6);
      c.labels[k].push_back(values[k] < 0 ? "" : mb(values[k]));
    }
  }
  std::string out = inline_svg(bars_svg(c));
  out += "<table><tr><th>rank</th><th>parameters</th><th>gradients</th><th>optimizer state</th>"
         "<th>model states</th><th>predicted</th><th>peak</th></tr>\n";
  for (const RankModelStates& r : s.memory_per_rank) {
    out += "<tr><td>" + std::to_string(r.rank) + "</td><td>" + mb(r.parameters) + "</td><td>" +
           mb(r.gradients) + "</td><td>" + mb(r.optimizer) + "</td><td>" + mb(r.model_state) +
           "</td><td>" + (s.model_state_predicted ? mb(*s.model_state_predicted) : "-") + "</td><td>" +
           mb(r.peak) + "</td></tr>\n";
  }
  return out + "</table>\n" +
         (s.model_state_predicted ? "" : missing("This strategy's final JSON gives no prediction."));
}

std::string comm_section(const RunSummaryLine& s) {
  if (s.comm_per_step.empty()) return missing("No bytes per collective: the run was one process, or its train tool wrote no \"comm_per_step\".");
  BarChart c;
  c.title = "bytes rank 0 sent per training step, per collective (log scale)";
  c.y_label = "bytes per step";
  c.series = {"bytes"};
  c.values.resize(1);
  c.labels.resize(1);
  c.log_y = true;
  std::string table = "<table><tr><th>collective</th><th>calls per step</th><th>bytes per step</th></tr>\n";
  for (const CollectiveBytes& k : s.comm_per_step) {
    c.groups.push_back(k.collective);
    c.values[0].push_back(k.bytes);
    c.labels[0].push_back(bytes_text(k.bytes));
    char row[200];
    std::snprintf(row, sizeof row, "<tr><td>%s</td><td>%.3g</td><td>%.0f</td></tr>\n",
                  xml_escaped(k.collective).c_str(), k.calls, k.bytes);
    table += row;
  }
  return inline_svg(bars_svg(c)) + table + "</table>\n";
}

std::string flags_section(const RunDirectory& run) {
  std::string out;
  if (!run.command.empty()) {
    out += "<pre>" + xml_escaped(run.command) + "</pre>\n";
  } else {
    out += missing("No command.txt in the run directory: the train tool does not record its command line; the settings below are its final JSON's.");
  }
  if (!run.summary) return out + missing("No final JSON line (save the train tool's standard output in the run directory).");
  out += "<table><tr><th>setting</th><th>value</th></tr>\n";
  for (const auto& [key, value] : run.summary->settings) {
    out += "<tr><td>" + xml_escaped(key) + "</td><td>" + xml_escaped(value) + "</td></tr>\n";
  }
  return out + "</table>\n";
}

std::string headline(const RunSummaryLine& s) {
  std::string line = s.setting("model") + " under " + s.setting("strategy") + " on " +
                     s.setting("world_size") + " rank(s): train loss " + s.setting("train_loss");
  if (!s.setting("test_accuracy").empty()) line += ", test accuracy " + s.setting("test_accuracy");
  if (!s.setting("val_loss").empty()) line += ", validation loss " + s.setting("val_loss");
  if (!s.setting("images_per_second").empty()) line += ", " + s.setting("images_per_second") + " images/s";
  if (!s.setting("tokens_per_second").empty()) line += ", " + s.setting("tokens_per_second") + " tokens/s";
  return line + ", " + s.setting("wall_seconds") + " s";
}

}  // namespace

std::string run_report_html(const RunDirectory& run) {
  std::ostringstream os;
  os << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
     << "<title>tessera run report: " << xml_escaped(run.path) << "</title>\n"
     << "<style>" << kStyle << "</style>\n</head>\n<body>\n"
     << "<h1>Run report: " << xml_escaped(run.path) << "</h1>\n";
  if (run.summary) {
    os << "<p>" << xml_escaped(headline(*run.summary)) << "</p>\n";
  } else {
    os << missing("No final JSON line in this run directory (save train's standard output there).");
  }
  os << "<h2>Loss and accuracy</h2>\n" << curves_section(run)
     << "<h2>Step timeline, every rank</h2>\n" << timeline_section(run)
     << "<h2>Memory per rank: measured beside predicted</h2>\n"
     << (run.summary ? memory_section(*run.summary) : missing("No final JSON line."))
     << "<h2>Bytes per collective</h2>\n"
     << (run.summary ? comm_section(*run.summary) : missing("No final JSON line."))
     << "<h2>The run's flags</h2>\n" << flags_section(run)
     << "<h2>Files</h2>\n<ul>\n";
  for (const std::string& f : run.metrics) os << "<li>metrics: " << xml_escaped(f) << "</li>\n";
  for (const std::string& f : run.traces) os << "<li>trace: " << xml_escaped(f) << "</li>\n";
  if (run.summary) os << "<li>final JSON: " << xml_escaped(run.summary->path) << "</li>\n";
  os << "</ul>\n<p class=\"missing\">Made by tessera's explain report.</p>\n</body>\n</html>\n";
  return os.str();
}

}  // namespace explain
}  // namespace tessera
