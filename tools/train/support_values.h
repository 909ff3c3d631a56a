// What the support table's two files share: the values its rows name (the strategies, the
// compressors, lists of them less some) and support_refusals.cc's rows, which support_table.cc
// serves.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "tools/train/support_table.h"

namespace tessera {
namespace train {

inline const std::vector<std::string> kStrategies = {
    "single", "ddp", "zero1", "zero2", "zero3", "pipeline", "local-sgd", "gossip", "async"};
inline const std::vector<std::string> kCompressions = {"none", "fp16",    "bf16", "topk",
                                                       "randomk", "qsgd", "sign", "powersgd"};
// --compression's kinds that change the values sent (not only their precision).
inline const std::vector<std::string> kLossyCompressors = {"topk", "randomk", "qsgd", "sign",
                                                           "powersgd"};

// `all` without `removed`, in `all`'s order.
inline std::vector<std::string> except(const std::vector<std::string>& all,
                                       const std::vector<std::string>& removed) {
  std::vector<std::string> out;
  for (const std::string& s : all) {
    if (std::find(removed.begin(), removed.end(), s) == removed.end()) out.push_back(s);
  }
  return out;
}

// Every refusal, each naming the fewest axes that make the combination fail; every reset of a
// restart on fewer ranks (support_refusals.cc).
std::vector<Refusal> make_refusals();
std::vector<Reset> make_resets();

}  // namespace train
}  // namespace tessera
