// A corpus's training and validation tokens, tokenized once and stored: the first run writes
// them as token files (data/token_file.h) under the cache directory, later runs read them.
//
//   /var/cache/tessera/tokens/fortunes-1a2b3c4d-gpt2-train.bin     (tools/setup.sh makes the
//   /var/cache/tessera/tokens/fortunes-1a2b3c4d-gpt2-val.bin        directory, writable by all)
//
// The name holds the corpus's name, the crc32 of its two texts and the tokenizer's name: a new
// version of the fortunes package, a change to how the corpus is cut, or another tokenizer
// makes new files, and a stale file is never read. The corpus itself is read every time (a few
// milliseconds for 2.5 MB); tokenizing it is what is saved. Several ranks starting together
// may all tokenize and write; each file is written atomically, so every reader sees whole files.
// When the directory cannot be written, the tokens are used from memory and one line on stderr
// says why they were not stored.
//
//   data::TextTokens text = data::load_text_tokens(data::TextDataOptions().tokenizer("byte"));
//   auto train = std::make_shared<data::TokenWindows>(text.train, seq_len, train_limit);
//   auto val = std::make_shared<data::TokenWindows>(text.val, seq_len);
//   // the model's vocabulary: text.vocab_size (50,257 or 256)
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/text_corpus.h"
#include "data/tokenizer.h"

namespace tessera {
namespace data {

inline constexpr const char* kTokenCacheDir = "/var/cache/tessera/tokens";

class TextDataOptions {
 public:
  // "fortunes" (data/text_corpus.h), or the path of a text file.
  TextDataOptions& corpus(std::string c) { corpus_ = std::move(c); return *this; }
  // "gpt2" or "byte" (data/tokenizer.h).
  TextDataOptions& tokenizer(std::string t) { tokenizer_ = std::move(t); return *this; }
  // Where the token files are stored; "" stores nothing.
  TextDataOptions& cache_dir(std::string d) { cache_dir_ = std::move(d); return *this; }
  TextDataOptions& gpt2_dir(std::string d) { gpt2_dir_ = std::move(d); return *this; }
  TextDataOptions& fortunes_dir(std::string d) { fortunes_dir_ = std::move(d); return *this; }
  const std::string& corpus() const { return corpus_; }
  const std::string& tokenizer() const { return tokenizer_; }
  const std::string& cache_dir() const { return cache_dir_; }
  const std::string& gpt2_dir() const { return gpt2_dir_; }
  const std::string& fortunes_dir() const { return fortunes_dir_; }

 private:
  std::string corpus_ = "fortunes", tokenizer_ = "gpt2", cache_dir_ = kTokenCacheDir,
              gpt2_dir_ = kGpt2Dir, fortunes_dir_ = kFortunesDir;
};

struct TextTokens {
  std::shared_ptr<const std::vector<uint16_t>> train, val;
  int64_t vocab_size = 0;
  // The token files read or written; empty when the tokens were not stored.
  std::string train_file, val_file;
  bool tokenized = false;  // true when this call tokenized the text (no stored files were read)
};

// The corpus that options.corpus() names.
TextCorpus read_corpus(const TextDataOptions& options);

// The stored tokens of (corpus, tokenizer), made and stored first if they are not there.
TextTokens load_text_tokens(const TextDataOptions& options = TextDataOptions());

}  // namespace data
}  // namespace tessera
