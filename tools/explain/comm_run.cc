#include "tools/explain/comm_run.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "tensor/check.h"

namespace tessera {
namespace explain {

MeasuredComm read_measured_comm(const std::string& path) {
  std::ifstream in(path);
  TS_CHECK(in.good(), "cannot read --run='", path, "'");
  std::string line, last;
  while (std::getline(in, line)) {
    if (line.rfind("{", 0) == 0 && line.find("\"comm_per_step\"") != std::string::npos) last = line;
  }
  TS_CHECK(!last.empty(), "--run='", path,
           "' has no line of the train tool's final JSON with \"comm_per_step\" (a run on more "
           "than one rank, by this version of the train tool, prints one as its last line)");
  MeasuredComm m;
  m.path = path;
  try {
    const nlohmann::json run = nlohmann::json::parse(last);
    m.model = run.at("model").get<std::string>();
    m.strategy = run.at("strategy").get<std::string>();
    m.ranks = run.at("world_size").get<int>();
    if (run.contains("compression")) {
      // "topk:0.01+ef": error feedback changes no message, so the compressor's name alone.
      m.compression = run.at("compression").at("name").get<std::string>();
      const size_t ef = m.compression.rfind("+ef");
      if (ef != std::string::npos && ef + 3 == m.compression.size()) m.compression.resize(ef);
    }
    for (const nlohmann::json& c : run.at("comm_per_step")) {
      m.per_step.push_back({c.at("collective").get<std::string>(), c.at("calls").get<double>(),
                            c.at("bytes").get<double>()});
    }
  } catch (const nlohmann::json::exception& e) {
    TS_CHECK(false, "--run='", path, "': its final JSON line is not as the train tool writes it (",
             e.what(), ")");
  }
  return m;
}

}  // namespace explain
}  // namespace tessera
