#include "tools/explain/metrics_runs.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tensor/check.h"

namespace tessera {
namespace explain {

namespace {

using nlohmann::json;

// What a field holds, for an error: "null", "\"fast\"", "an array".
std::string shown(const json& v) {
  if (v.is_string()) return v.dump();
  if (v.is_null()) return "null";
  return v.is_boolean() ? "a boolean" : v.is_array() ? "an array" : v.is_object() ? "an object" : "a number";
}

// A line's field as a number; the error names file, line, field and what it held.
double number(const json& line, const char* key, const std::string& where) {
  TS_CHECK(line.contains(key), where, ": no \"", key, "\"");
  const json& v = line.at(key);
  TS_CHECK(v.is_number(), where, ": \"", key, "\" is ", shown(v), ", expected a number");
  return v.get<double>();
}

std::string excerpt(const std::string& text) {
  return text.size() <= 60 ? text : text.substr(0, 57) + "...";
}

}  // namespace

const std::vector<Quantity>& all_quantities() {
  static const std::vector<Quantity> all = {Quantity::kLoss, Quantity::kAccuracy,
                                            Quantity::kLossScale, Quantity::kThroughput};
  return all;
}

const char* quantity_name(Quantity q) {
  switch (q) {
    case Quantity::kLoss: return "loss";
    case Quantity::kAccuracy: return "accuracy";
    case Quantity::kLossScale: return "loss-scale";
    case Quantity::kThroughput: return "throughput";
  }
  return "?";
}

const char* quantity_label(Quantity q) {
  switch (q) {
    case Quantity::kLoss: return "loss";
    case Quantity::kAccuracy: return "test accuracy";
    case Quantity::kLossScale: return "loss scale";
    case Quantity::kThroughput: return "images/s";
  }
  return "?";
}

Quantity parse_quantity(const std::string& name) {
  for (Quantity q : all_quantities()) {
    if (name == quantity_name(q)) return q;
  }
  TS_CHECK(false, "expected loss, accuracy, loss-scale or throughput, got '", name, "'");
  return Quantity::kLoss;
}

bool MetricsRun::has(Quantity q) const {
  switch (q) {
    case Quantity::kLoss:
    case Quantity::kThroughput: return !steps.empty();
    case Quantity::kAccuracy: return !epochs.empty();
    case Quantity::kLossScale:
      return std::any_of(steps.begin(), steps.end(),
                         [](const MetricsLine& l) { return l.loss_scale.has_value(); });
  }
  return false;
}

const char* missing_reason(Quantity q) {
  switch (q) {
    case Quantity::kAccuracy: return "no epoch line: the run ended before its first epoch did";
    case Quantity::kLossScale:
      return "no step line has \"loss_scale\": the run did not scale its loss (train --amp=fp16 does)";
    default: return "no step line";
  }
}

std::vector<CurvePoint> MetricsRun::curve(Quantity q, bool by_time) const {
  TS_CHECK(has(q), path, ": no ", quantity_label(q), " in this run (", missing_reason(q), ")");
  std::vector<CurvePoint> out;
  for (const MetricsLine& l : q == Quantity::kAccuracy ? epochs : steps) {
    const double x = by_time ? l.elapsed_seconds : l.step;
    switch (q) {
      case Quantity::kLoss: out.push_back({x, l.loss}); break;
      case Quantity::kAccuracy: out.push_back({x, l.test_accuracy}); break;
      case Quantity::kThroughput: out.push_back({x, l.images_per_second}); break;
      case Quantity::kLossScale:
        if (l.loss_scale) out.push_back({x, *l.loss_scale});
        break;
    }
  }
  return out;
}

MetricsRun read_metrics(const std::string& path) {
  std::ifstream in(path);
  TS_CHECK(in.good(), path, ": cannot read the file (write one with train --metrics=FILE)");
  MetricsRun run;
  run.path = path;
  int number_of_line = 0;
  for (std::string text; std::getline(in, text);) {
    ++number_of_line;
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(number_of_line);
    json line;
    try {
      line = json::parse(text);
    } catch (const json::parse_error& e) {
      TS_CHECK(false, where, ": not a JSON object (", e.what(), "): '", excerpt(text), "'");
    }
    TS_CHECK(line.is_object(), where, ": not a JSON object: '", excerpt(text), "'");
    const std::string kind = line.contains("kind") && line["kind"].is_string() ? line["kind"].get<std::string>() : "";
    TS_CHECK(kind == "step" || kind == "epoch", where, ": \"kind\" is ",
             line.contains("kind") ? shown(line.at("kind")) : std::string("missing"),
             ", expected \"step\" or \"epoch\" (a --metrics line of train)");
    MetricsLine m;
    m.line = number_of_line;
    m.step = number(line, "step", where);
    m.elapsed_seconds = number(line, "elapsed_seconds", where);
    if (kind == "step") {
      m.loss = number(line, "loss", where);
      m.images_per_second = number(line, "images_per_second", where);
      if (line.contains("loss_scale")) m.loss_scale = number(line, "loss_scale", where);
      run.steps.push_back(m);
    } else {
      m.train_loss = number(line, "train_loss", where);
      m.test_accuracy = number(line, "test_accuracy", where);
      run.epochs.push_back(m);
    }
  }
  TS_CHECK(!run.steps.empty(), path, ": no step lines (", number_of_line,
           number_of_line == 1 ? " line" : " lines",
           run.epochs.empty() ? "; write one with train --metrics=FILE)"
                              : ", epoch lines only: rank 0 trained no batch, as the parameter "
                                "server of --strategy=async --batch-assignment=shared does)");
  return run;
}

RunSummary summarize(const MetricsRun& run) {
  RunSummary s;
  s.steps = static_cast<int64_t>(run.steps.size());
  s.epochs = static_cast<int64_t>(run.epochs.size());
  const MetricsLine& last = run.steps.back();
  s.last_step = last.step;
  s.elapsed_seconds = last.elapsed_seconds;
  s.final_loss = last.loss;
  double sum = 0;
  for (const MetricsLine& l : run.steps) sum += l.images_per_second;
  s.mean_images_per_second = sum / s.steps;
  for (const MetricsLine& l : run.epochs) {
    s.final_train_loss = l.train_loss;
    s.best_accuracy = std::max(s.best_accuracy.value_or(l.test_accuracy), l.test_accuracy);
    s.elapsed_seconds = std::max(s.elapsed_seconds, l.elapsed_seconds);
  }
  return s;
}

}  // namespace explain
}  // namespace tessera
