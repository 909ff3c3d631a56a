#include "data/token_windows.h"

#include <algorithm>

#include "tensor/ops.h"

namespace tessera {
namespace data {

TokenWindows::TokenWindows(std::shared_ptr<const std::vector<uint16_t>> tokens, int64_t seq_len,
                           int64_t limit)
    : tokens_(std::move(tokens)), seq_len_(seq_len) {
  TS_CHECK(tokens_ != nullptr, "TokenWindows: no token stream");
  TS_CHECK(seq_len > 0, "TokenWindows: seq_len must be > 0, got ", seq_len);
  TS_CHECK(limit >= 0, "TokenWindows: limit must be >= 0, got ", limit);
  const auto n = static_cast<int64_t>(tokens_->size());
  windows_ = n > 0 ? (n - 1) / seq_len : 0;
  TS_CHECK(windows_ > 0, "TokenWindows: ", n, " tokens make no window of seq_len + 1 = ",
           seq_len + 1, " tokens");
  if (limit > 0) windows_ = std::min(windows_, limit);
}

Batch TokenWindows::get_batch(const std::vector<int64_t>& indices) const {
  const auto b = static_cast<int64_t>(indices.size());
  Tensor inputs = empty({b, seq_len_}, kI64), targets = empty({b, seq_len_}, kI64);
  int64_t* in = inputs.data<int64_t>();
  int64_t* out = targets.data<int64_t>();
  for (int64_t k = 0; k < b; ++k) {
    const int64_t i = indices[k];
    TS_CHECK(i >= 0 && i < windows_, "TokenWindows: window ", i, " out of range [0, ", windows_,
             ")");
    const uint16_t* window = tokens_->data() + i * seq_len_;
    for (int64_t t = 0; t < seq_len_; ++t) {
      in[k * seq_len_ + t] = window[t];
      out[k * seq_len_ + t] = window[t + 1];
    }
  }
  return {inputs, targets};
}

}  // namespace data
}  // namespace tessera
