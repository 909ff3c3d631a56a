#include "dist/state_dict_gather.h"

#include <cstring>
#include <sstream>
#include <string>

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

Tensor bytes_of(const std::string& s) {
  Tensor t = empty({static_cast<int64_t>(s.size())}, kU8);
  if (!s.empty()) std::memcpy(t.raw_data(), s.data(), s.size());
  return t;
}

// All ranks' byte strings, concatenated in rank order; `counts` receives each rank's length.
Tensor all_gather_bytes(const Tensor& mine, ProcessGroup& group, std::vector<int64_t>& counts) {
  const int n = group.size();
  Tensor lengths = empty({n}, kI64);
  group.all_gather(from_vector<int64_t>({mine.numel()}, {1}), lengths,
                   std::vector<int64_t>(n, 1))->wait();
  counts = lengths.to_vector<int64_t>();
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  Tensor all = empty({total}, kU8);
  group.all_gather(mine, all, counts)->wait();
  return all;
}

}  // namespace

std::vector<StateDict> all_gather_state_dicts(const StateDict& mine, ProcessGroup& group) {
  // This rank's tensors' bytes, back to back, in entry order.
  int64_t data_bytes = 0;
  std::vector<Tensor> local;
  for (const auto& [name, t] : mine) {
    local.push_back(t.to(Device::cpu()).contiguous());
    data_bytes += static_cast<int64_t>(local.back().nbytes());
  }
  Tensor data = empty({data_bytes}, kU8);
  int64_t at = 0;
  for (const Tensor& t : local) {
    if (t.nbytes() > 0) std::memcpy(static_cast<char*>(data.raw_data()) + at, t.raw_data(), t.nbytes());
    at += static_cast<int64_t>(t.nbytes());
  }

  std::vector<int64_t> text_counts, data_counts;
  const Tensor texts = all_gather_bytes(bytes_of(describe(mine)), group, text_counts);
  const Tensor datas = all_gather_bytes(data, group, data_counts);

  std::vector<StateDict> out(group.size());
  const char* text = static_cast<const char*>(texts.raw_data());
  const char* bytes = static_cast<const char*>(datas.raw_data());
  for (int r = 0; r < group.size(); ++r) {
    std::istringstream lines(std::string(text, text_counts[r]));
    const char* end = bytes + data_counts[r];
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
    text += text_counts[r];
  }
  return out;
}

}  // namespace dist
}  // namespace tessera
