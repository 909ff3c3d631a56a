// Tokenizer: text -> token ids -> text. Two stand behind this interface:
//
//   "gpt2"  GPT-2's byte-level BPE with its real vocabulary (data/bpe_tokenizer.h): 50,257 ids,
//           about 4 bytes of English text per token;
//   "byte"  one token per byte (data/byte_tokenizer.h): 256 ids, for the smallest models, whose
//           embedding and output layers would otherwise be mostly vocabulary.
//
// Both are lossless on any bytes: decode(encode(s)) == s.
//
//   std::unique_ptr<data::Tokenizer> tok = data::make_tokenizer("gpt2");
//   tok->encode("Hello world")  ->  {15496, 995}
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {
namespace data {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // "gpt2" or "byte": what make_tokenizer takes, and part of the token files' names.
  virtual std::string name() const = 0;
  // Token ids are in [0, vocab_size()).
  virtual int64_t vocab_size() const = 0;
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // The bytes the tokens stand for; an Error on an id outside [0, vocab_size()).
  virtual std::string decode(const std::vector<int32_t>& tokens) const = 0;
};

// GPT-2's vocabulary files, as tools/setup.sh installs them.
inline constexpr const char* kGpt2Dir = "/usr/local/share/tessera/gpt2";

// "gpt2" (reads encoder.json and vocab.bpe from gpt2_dir) or "byte".
std::unique_ptr<Tokenizer> make_tokenizer(const std::string& name,
                                          const std::string& gpt2_dir = kGpt2Dir);

}  // namespace data
}  // namespace tessera
