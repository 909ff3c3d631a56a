#include "dist/gather_bytes.h"

#include <cstring>

#include "tensor/ops.h"

namespace tessera {
namespace dist {

std::vector<std::string> all_gather_bytes(const std::string& mine, ProcessGroup& group) {
  const int n = group.size();
  Tensor lengths = empty({n}, kI64);
  group.all_gather(from_vector<int64_t>({static_cast<int64_t>(mine.size())}, {1}), lengths,
                   std::vector<int64_t>(n, 1))->wait();
  const std::vector<int64_t> counts = lengths.to_vector<int64_t>();
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  Tensor all = empty({total}, kU8);
  Tensor local = empty({static_cast<int64_t>(mine.size())}, kU8);
  if (!mine.empty()) std::memcpy(local.raw_data(), mine.data(), mine.size());
  group.all_gather(local, all, counts)->wait();
  std::vector<std::string> out;
  const char* bytes = static_cast<const char*>(total > 0 ? all.raw_data() : "");
  for (int r = 0; r < n; ++r) {
    out.emplace_back(bytes, counts[r]);
    bytes += counts[r];
  }
  return out;
}

}  // namespace dist
}  // namespace tessera
