#include "dist/state_dict_gather.h"

#include <cstring>
#include <sstream>
#include <string>

#include "dist/gather_bytes.h"
#include "tensor/check.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {

namespace {

// One line per entry: name, dtype code, shape ("3,4"; empty for a scalar).
std::string describe(const StateDict& state) {
  std::string text;
  for (const auto& [name, t] : state) {
    TS_CHECK(name.find('\n') == std::string::npos && name.find('\t') == std::string::npos,
             "all_gather_state_dicts: entry '", name, "' has a tab or newline in its name");
    text += name + "\t" + std::to_string(static_cast<int>(t.dtype())) + "\t";
    for (size_t d = 0; d < t.shape().size(); ++d) {
      text += (d ? "," : "") + std::to_string(t.shape()[d]);
    }
    text += "\n";
  }
  return text;
}

}  // namespace

std::vector<StateDict> all_gather_state_dicts(const StateDict& mine, ProcessGroup& group) {
  // This rank's tensors' bytes, back to back, in entry order.
  std::string data;
  for (const auto& [name, t] : mine) {
    const Tensor c = t.to(Device::cpu()).contiguous();
    data.append(static_cast<const char*>(c.raw_data()), c.nbytes());
  }
  const std::vector<std::string> texts = all_gather_bytes(describe(mine), group);
  const std::vector<std::string> datas = all_gather_bytes(data, group);

  std::vector<StateDict> out(group.size());
  for (int r = 0; r < group.size(); ++r) {
    std::istringstream lines(texts[r]);
    const char* bytes = datas[r].data();
    const char* end = bytes + datas[r].size();
    for (std::string line; std::getline(lines, line);) {
      const size_t tab1 = line.find('\t'), tab2 = line.find('\t', tab1 + 1);
      const std::string name = line.substr(0, tab1);
      const DType dtype = static_cast<DType>(std::stoi(line.substr(tab1 + 1, tab2 - tab1 - 1)));
      Shape shape;
      std::istringstream dims(line.substr(tab2 + 1));
      for (std::string d; std::getline(dims, d, ',');) shape.push_back(std::stoll(d));
      Tensor t = empty(shape, dtype);
      TS_INTERNAL_ASSERT(bytes + t.nbytes() <= end, "all_gather_state_dicts: rank ", r,
                         " sent fewer bytes than its entries describe");
      if (t.nbytes() > 0) std::memcpy(t.raw_data(), bytes, t.nbytes());
      bytes += t.nbytes();
      out[r].set(name, t);
    }
    TS_INTERNAL_ASSERT(bytes == end, "all_gather_state_dicts: rank ", r,
                       " sent more bytes than its entries describe");
  }
  return out;
}

}  // namespace dist
}  // namespace tessera
