// A token stream as a Dataset of language-model examples: window i is the T + 1 tokens
// [i T, i T + T + 1); its input is the first T, its target the last T (the next token at each
// position):
//
//   tokens   t0 t1 t2 t3 t4 t5 t6 t7 t8 t9        T = 4: 2 windows (9 tokens would also give 2)
//   window 0 t0 t1 t2 t3 t4                       input t0..t3, target t1..t4
//   window 1             t4 t5 t6 t7 t8           input t4..t7, target t5..t8
//
// Windows do not overlap in their inputs (each token is predicted once per epoch), as llm.c's
// and nanoGPT's fixed-stride loaders read a stream; the last token of one window's target is
// the first of the next one's input. A stream of N tokens gives (N - 1) / T windows, the
// remainder unused. Any Sampler, DistributedSampler included, picks windows by index;
// get_batch gives i64 inputs [B, T] and targets [B, T], for an embedding and cross-entropy.
//
//   auto text = data::load_text_tokens(data::TextDataOptions().tokenizer("gpt2"));
//   auto train = std::make_shared<data::TokenWindows>(text.train, 256);
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "data/dataset.h"

namespace tessera {
namespace data {

class TokenWindows : public Dataset {
 public:
  // limit > 0 keeps the first `limit` windows (all when there are fewer); 0 keeps all.
  TokenWindows(std::shared_ptr<const std::vector<uint16_t>> tokens, int64_t seq_len,
               int64_t limit = 0);
  int64_t size() const override { return windows_; }
  Batch get_batch(const std::vector<int64_t>& indices) const override;
  int64_t seq_len() const { return seq_len_; }

 private:
  std::shared_ptr<const std::vector<uint16_t>> tokens_;
  int64_t seq_len_, windows_;
};

}  // namespace data
}  // namespace tessera
