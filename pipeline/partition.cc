#include "pipeline/partition.h"

#include "pipeline/balance.h"
#include "tensor/check.h"

namespace tessera {
namespace pipeline {

std::vector<std::shared_ptr<nn::Sequential>> partition(const nn::Sequential& model,
                                                       const std::vector<int>& balance) {
  check_balance(balance, static_cast<int>(model.size()));
  std::vector<std::shared_ptr<nn::Sequential>> out;
  size_t begin = 0;
  for (int n : balance) {
    out.push_back(model.slice(begin, begin + n));
    begin += n;
  }
  return out;
}

std::vector<std::shared_ptr<nn::Sequential>> parts_of_rank(
    const std::vector<std::shared_ptr<nn::Sequential>>& parts, int rank, int ranks) {
  TS_CHECK(ranks >= 1 && rank >= 0 && rank < ranks, "parts_of_rank: rank ", rank,
           " is not in [0, ", ranks, ")");
  TS_CHECK(parts.size() % ranks == 0, "parts_of_rank: ", parts.size(),
           " parts do not divide among ", ranks, " ranks");
  std::vector<std::shared_ptr<nn::Sequential>> out;
  for (size_t i = rank; i < parts.size(); i += ranks) out.push_back(parts[i]);
  return out;
}

}  // namespace pipeline
}  // namespace tessera
