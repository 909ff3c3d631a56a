#include "pipeline/microbatch.h"

#include <algorithm>

#include "tensor/check.h"

namespace tessera {
namespace pipeline {

std::vector<int64_t> microbatch_sizes(int64_t batch, int microbatches) {
  TS_CHECK(microbatches >= 1, "micro-batches: M must be at least 1, got ", microbatches);
  TS_CHECK(batch >= 1, "micro-batches: the batch has ", batch, " rows; need at least one");
  const int64_t m = std::min<int64_t>(microbatches, batch);
  std::vector<int64_t> out(m, batch / m);
  for (int64_t i = 0; i < batch % m; ++i) ++out[i];
  return out;
}

std::vector<Microbatch> split_microbatches(const Tensor& input, const Tensor& target,
                                           int microbatches) {
  TS_CHECK(input.defined() && input.dim() >= 1, "micro-batches: the input needs a batch dimension");
  const int64_t B = input.size(0);
  TS_CHECK(!target.defined() || (target.dim() >= 1 && target.size(0) == B),
           "micro-batches: the input has ", B, " rows but the target has shape ",
           target.defined() ? target.shape() : Shape{});
  std::vector<Microbatch> out;
  int64_t at = 0;
  for (int64_t n : microbatch_sizes(B, microbatches)) {
    out.push_back({input.narrow(0, at, n), target.defined() ? target.narrow(0, at, n) : Tensor(),
                   static_cast<double>(n) / B});
    at += n;
  }
  return out;
}

}  // namespace pipeline
}  // namespace tessera
