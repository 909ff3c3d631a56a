#include "tools/explain/comm_run.h"

#include <fstream>

#include "tensor/check.h"
#include "tools/explain/json_value.h"

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
  const JsonValue run = parse_json(last);
  MeasuredComm m;
  m.path = path;
  m.model = run.get("model").string();
  m.strategy = run.get("strategy").string();
  m.ranks = static_cast<int>(run.get("world_size").number());
  if (run.has("compression")) {
    // "topk:0.01+ef": error feedback changes no message, so the compressor's name alone.
    m.compression = run.get("compression").get("name").string();
    const size_t ef = m.compression.rfind("+ef");
    if (ef != std::string::npos && ef + 3 == m.compression.size()) m.compression.resize(ef);
  }
  for (const JsonValue& c : run.get("comm_per_step").array()) {
    m.per_step.push_back(
        {c.get("collective").string(), c.get("calls").number(), c.get("bytes").number()});
  }
  return m;
}

}  // namespace explain
}  // namespace tessera
