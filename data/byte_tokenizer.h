// The byte-level tokenizer: token = byte value, vocabulary 256. Nothing to learn or load; a
// model over it spends no parameters on a large vocabulary, which suits the smallest runs (a
// gpt-nano on bytes has a 256 x 128 embedding instead of 50,257 x 128), at the price of ~4x
// longer sequences than GPT-2's BPE for the same text.
#pragma once

#include "data/tokenizer.h"

namespace tessera {
namespace data {

class ByteTokenizer : public Tokenizer {
 public:
  std::string name() const override { return "byte"; }
  int64_t vocab_size() const override { return 256; }
  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int32_t>& tokens) const override;
};

}  // namespace data
}  // namespace tessera
