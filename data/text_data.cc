#include "data/text_data.h"

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "data/token_file.h"
#include "tensor/check.h"

namespace tessera {
namespace data {

namespace {

bool exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

// The crc32 of both texts, as 8 hex digits: the files' key for this exact corpus.
std::string corpus_key(const TextCorpus& corpus) {
  uLong crc = crc32(0L, Z_NULL, 0);
  for (const std::string* text : {&corpus.train, &corpus.val}) {
    const std::string size = std::to_string(text->size()) + ":";
    crc = crc32(crc, reinterpret_cast<const Bytef*>(size.data()), size.size());
    // zlib's length is a uInt: the text in pieces of at most 1 GiB.
    for (size_t at = 0; at < text->size(); at += size_t{1} << 30) {
      const size_t n = std::min(text->size() - at, size_t{1} << 30);
      crc = crc32(crc, reinterpret_cast<const Bytef*>(text->data() + at), static_cast<uInt>(n));
    }
  }
  char hex[9];
  std::snprintf(hex, sizeof(hex), "%08lx", static_cast<unsigned long>(crc & 0xFFFFFFFFul));
  return hex;
}

std::shared_ptr<const std::vector<uint16_t>> narrow(const std::vector<int32_t>& tokens) {
  // Every id is below the vocabulary's size, and both vocabularies fit 16 bits.
  return std::make_shared<const std::vector<uint16_t>>(tokens.begin(), tokens.end());
}

}  // namespace

TextCorpus read_corpus(const TextDataOptions& options) {
  if (options.corpus() == "fortunes") return fortunes_corpus(options.fortunes_dir());
  return text_file_corpus(options.corpus());
}

TextTokens load_text_tokens(const TextDataOptions& options) {
  const TextCorpus corpus = read_corpus(options);
  const std::unique_ptr<Tokenizer> tokenizer = make_tokenizer(options.tokenizer(),
                                                              options.gpt2_dir());
  TS_CHECK(tokenizer->vocab_size() <= 65536, "load_text_tokens: tokenizer \"", tokenizer->name(),
           "\" has ", tokenizer->vocab_size(), " tokens, more than uint16 token files hold");
  TextTokens tokens;
  tokens.vocab_size = tokenizer->vocab_size();

  std::string train_file, val_file;
  if (!options.cache_dir().empty()) {
    const std::string stem = options.cache_dir() + "/" + corpus.name + "-" + corpus_key(corpus) +
                             "-" + tokenizer->name();
    train_file = stem + "-train.bin";
    val_file = stem + "-val.bin";
    if (exists(train_file) && exists(val_file)) {
      tokens.train = std::make_shared<const std::vector<uint16_t>>(read_token_file(train_file));
      tokens.val = std::make_shared<const std::vector<uint16_t>>(read_token_file(val_file));
      tokens.train_file = train_file;
      tokens.val_file = val_file;
      return tokens;
    }
  }

  tokens.tokenized = true;
  const std::vector<int32_t> train = tokenizer->encode(corpus.train);
  const std::vector<int32_t> val = tokenizer->encode(corpus.val);
  tokens.train = narrow(train);
  tokens.val = narrow(val);
  if (!train_file.empty()) {
    try {
      std::error_code ignored;  // a directory that cannot be made fails the write, which says why
      std::filesystem::create_directories(options.cache_dir(), ignored);
      write_token_file(train_file, *tokens.train);
      write_token_file(val_file, *tokens.val);
      tokens.train_file = train_file;
      tokens.val_file = val_file;
    } catch (const Error& e) {
      std::cerr << "load_text_tokens: tokens kept in memory, not stored: " << e.what()
                << (options.cache_dir() == kTokenCacheDir
                        ? std::string(" (tools/setup.sh, as root, makes ") + kTokenCacheDir +
                              " writable by all)"
                        : std::string())
                << "\n";
    }
  }
  return tokens;
}

}  // namespace data
}  // namespace tessera
