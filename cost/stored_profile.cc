#include "cost/stored_profile.h"

#include <cmath>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "cost/stored_profile_files.h"
#include "tensor/check.h"

namespace tessera {
namespace cost {

namespace {

using nlohmann::json;

// json[key] as T, an error naming the file and the key otherwise.
template <typename T>
T field(const json& j, const char* key, const std::string& path) {
  TS_CHECK(j.is_object() && j.contains(key), path, ": no \"", key, "\"");
  try {
    return j.at(key).get<T>();
  } catch (const json::exception& e) {
    TS_CHECK(false, path, ": \"", key, "\" is ", j.at(key).dump(), ", not the expected kind (",
             e.what(), ")");
    throw;
  }
}

bool same_input(const StoredProfile& s, const std::string& model, const ModelInput& in) {
  return s.model == model && s.data == in.name && s.seq_len == in.seq_len && s.vocab == in.vocab &&
         s.context == in.context && s.recompute == in.recompute.str();
}

}  // namespace

std::string StoredProfile::provenance() const {
  return model + " on " + data + " at batch " + std::to_string(batch) + ", measured on " + machine +
         " on " + date;
}

StoredProfile parse_stored_profile(const std::string& text, const std::string& path) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    TS_CHECK(false, path, ": not JSON (", e.what(), ")");
  }
  StoredProfile s;
  s.path = path;
  s.model = field<std::string>(j, "model", path);
  s.data = field<std::string>(j, "data", path);
  s.seq_len = field<int64_t>(j, "seq_len", path);
  s.vocab = field<int64_t>(j, "vocab", path);
  s.context = field<int64_t>(j, "context", path);
  s.recompute = field<std::string>(j, "recompute", path);
  s.batch = field<int64_t>(j, "batch", path);
  s.optimizer = field<std::string>(j, "optimizer", path);
  s.repeats = field<int>(j, "repeats", path);
  s.machine = field<std::string>(j, "machine", path);
  s.date = field<std::string>(j, "date", path);
  s.command = field<std::string>(j, "command", path);
  s.step_overhead_seconds = field<double>(j, "step_overhead_seconds", path);
  TS_CHECK(s.batch >= 1, path, ": batch ", s.batch, " (must be at least 1)");
  for (const json& layer : field<json>(j, "layers", path)) {
    const std::string name = field<std::string>(layer, "name", path);
    const double seconds = field<double>(layer, "seconds", path);
    TS_CHECK(seconds >= 0, path, ": layer ", name, " takes ", seconds, " s");
    s.layers.push_back({name, seconds});
  }
  TS_CHECK(!s.layers.empty(), path, ": no layers");
  return s;
}

std::string stored_profile_json(const StoredProfile& s) {
  // Times to 0.1 us: what a measurement on a shared machine can tell, and a file that reads.
  const auto rounded = [](double seconds) { return std::round(seconds * 1e7) / 1e7; };
  // ordered_json keeps the fields in the order a reader expects them; one layer a line.
  nlohmann::ordered_json j;
  j["model"] = s.model;
  j["data"] = s.data;
  j["seq_len"] = s.seq_len;
  j["vocab"] = s.vocab;
  j["context"] = s.context;
  j["recompute"] = s.recompute;
  j["batch"] = s.batch;
  j["optimizer"] = s.optimizer;
  j["repeats"] = s.repeats;
  j["machine"] = s.machine;
  j["date"] = s.date;
  j["command"] = s.command;
  j["step_overhead_seconds"] = rounded(s.step_overhead_seconds);
  std::string text = j.dump(1);
  text.resize(text.size() - 2);  // "\n}"
  text += ",\n \"layers\": [\n";
  for (size_t i = 0; i < s.layers.size(); ++i) {
    nlohmann::ordered_json l;
    l["name"] = s.layers[i].first;
    l["seconds"] = rounded(s.layers[i].second);
    text += "  " + l.dump(-1, ' ', false) + (i + 1 < s.layers.size() ? ",\n" : "\n");
  }
  return text + " ]\n}\n";
}

const std::vector<StoredProfile>& stored_profiles() {
  static const std::vector<StoredProfile> all = [] {
    std::vector<StoredProfile> out;
    for (const auto& [path, text] : stored_profile_files()) out.push_back(parse_stored_profile(text, path));
    return out;
  }();
  return all;
}

const StoredProfile* find_stored_profile(const std::string& model, const ModelInput& in) {
  for (const StoredProfile& s : stored_profiles()) {
    if (same_input(s, model, in)) return &s;
  }
  return nullptr;
}

std::string stored_profile_path(const std::string& model, const ModelInput& in) {
  std::string name = model + "-" + in.name;
  const ModelInput text = parse_model_input("text");
  if (in.text() && (in.seq_len != text.seq_len || in.vocab != text.vocab || in.context != 0 ||
                    in.recompute.str() != "none")) {
    name += "-s" + std::to_string(in.seq_len) + "-v" + std::to_string(in.vocab);
    if (in.context != 0) name += "-c" + std::to_string(in.context);
    if (in.recompute.str() != "none") name += "-" + in.recompute.str();
  }
  return "cost/profiles/" + name + ".json";
}

void apply_stored_profile(const StoredProfile& s, OptimizerKind optimizer, ModelProfile* p) {
  TS_CHECK(s.layers.size() == p->layers.size(), s.path, ": ", s.layers.size(), " layers, but ",
           p->name, " has ", p->layers.size(), " (the model changed since ", s.date,
           ": measure it again, explain profile)");
  std::vector<double> seconds;
  const double scale = static_cast<double>(p->batch) / static_cast<double>(s.batch);
  for (size_t i = 0; i < s.layers.size(); ++i) {
    TS_CHECK(s.layers[i].first == p->layers[i].name, s.path, ": layer ", i, " is ",
             s.layers[i].first, ", but ", p->name, "'s is ", p->layers[i].name,
             " (the model changed since ", s.date, ": measure it again, explain profile)");
    seconds.push_back(s.layers[i].second * scale);
  }
  std::string source = "stored profile " + s.path + ", measured on " + s.machine + " on " + s.date +
                       " at batch " + std::to_string(s.batch);
  if (p->batch != s.batch) source += ", scaled to batch " + std::to_string(p->batch);
  set_layer_times(p, seconds, source);
  const bool same_step = p->batch == s.batch && s.optimizer == optimizer_name(optimizer);
  p->step_overhead_seconds = same_step ? s.step_overhead_seconds : 0;
}

StoredProfile make_stored_profile(const std::string& model, const ModelInput& in,
                                  OptimizerKind optimizer, const ModelProfile& p, int repeats,
                                  const std::string& command) {
  StoredProfile s;
  s.path = stored_profile_path(model, in);
  s.model = model;
  s.data = in.name;
  s.seq_len = in.seq_len;
  s.vocab = in.vocab;
  s.context = in.context;
  s.recompute = in.recompute.str();
  s.batch = p.batch;
  s.optimizer = optimizer_name(optimizer);
  s.repeats = repeats;
  s.machine = this_machine();
  s.date = today_utc();
  s.command = command;
  s.step_overhead_seconds = p.step_overhead_seconds;
  for (const LayerProfile& l : p.layers) s.layers.push_back({l.name, l.forward_seconds + l.backward_seconds});
  return s;
}

std::string this_machine() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, model = "unknown CPU";
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) model = line.substr(line.find_first_not_of(" \t", colon + 1));
      break;
    }
  }
  const unsigned cores = std::thread::hardware_concurrency();
  return model + " (" + std::to_string(cores) + (cores == 1 ? " core)" : " cores)");
}

std::string today_utc() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buf[16];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d", &utc);
  return buf;
}

}  // namespace cost
}  // namespace tessera
