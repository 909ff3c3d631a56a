// GPT-2's byte-level BPE (Radford et al. 2019; OpenAI's encoder.py), with its real vocabulary.
//
// Byte pair encoding starts from the text's bytes and repeatedly joins the adjacent pair that
// comes first in a ranked list of 50,000 merges learned from WebText, until no pair of the
// word is in the list; each piece left is a token:
//
//   " lower"               [ ][l][o][w][e][r]   its bytes
//   rank    7   e + r      [ ][l][o][w][er]     the word's pair that ranks first
//   rank   44   " " + l    [ l][o][w][er]
//   rank   66   o + w      [ l][ow][er]
//   rank  533   ow + er    [ l][ower]
//   rank 2537   " l" + ower [ lower]            one token, id 2793
//
// Because it starts from bytes, every string has an encoding (no unknown token) and decoding
// is concatenation. Merges never cross the words of the pre-tokenizer (data/pretokenize.h), so
// " dog." and " dog!" share the token " dog".
//
// The files: encoder.json maps each token to its id, vocab.bpe lists the merges by rank ("Ġ t"
// is rank 0). Both spell bytes as printable characters (bytes_to_unicode below: the space
// 0x20 is "Ġ", newline 0x0A is "Ċ"), because the BPE code OpenAI wrote worked on Unicode
// strings; here they are turned back into bytes once, when the files are read, and merges are
// kept as pairs of ids.
//
// encode caches each word's tokens (English text repeats its words: the 2.5 MB fortunes corpus
// is 640,000 words, 48,000 of them distinct), so most words cost one hash look-up.
// The cache is behind a mutex: one BpeTokenizer may be used from several threads.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "data/tokenizer.h"

namespace tessera {
namespace data {

class BpeTokenizer : public Tokenizer {
 public:
  // Reads dir/encoder.json and dir/vocab.bpe; a missing file is an Error naming it and how to
  // install it (tools/setup.sh).
  explicit BpeTokenizer(const std::string& dir = kGpt2Dir);

  std::string name() const override { return "gpt2"; }
  int64_t vocab_size() const override { return static_cast<int64_t>(vocab_.size()); }
  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int32_t>& tokens) const override;

  // "<|endoftext|>" (50256 in GPT-2), the document separator GPT-2 was trained with. encode
  // never makes it: the text "<|endoftext|>" is encoded as the characters it is.
  int32_t eot_token() const { return eot_; }
  // The merges, in rank order (50,000 for GPT-2).
  int64_t merge_count() const { return static_cast<int64_t>(merge_rank_.size()); }

 private:
  // One word's tokens, merged from its bytes (no cache).
  std::vector<int32_t> encode_word(std::string_view word) const;

  struct Merge {
    int32_t rank, token;  // the merge's place in vocab.bpe, and the token it makes
  };
  std::vector<std::string> vocab_;                  // id -> its bytes
  std::array<int32_t, 256> byte_token_{};           // byte -> the id of that single byte
  std::unordered_map<uint64_t, Merge> merge_rank_;  // (left id << 32 | right id) -> merge
  int32_t eot_ = -1;

  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

// GPT-2's printable spelling of bytes: the 188 printable Latin-1 bytes ('!'..'~', '¡'..'¬',
// '®'..'ÿ') stand for themselves; the other 68 (controls, space, DEL, NBSP, soft hyphen) are
// moved to U+0100 onwards in byte order, so 0x00 -> U+0100 'Ā', 0x20 (space) -> U+0120 'Ġ'.
std::array<char32_t, 256> bytes_to_unicode();

}  // namespace data
}  // namespace tessera
