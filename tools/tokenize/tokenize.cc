// tokenize: tokenizes a corpus once and stores its token files (data/text_data.h), or shows how a
// text is tokenized. What a training run with --data=text does on its first start, on its own,
// with the sizes and the time it took.
//
//   bazel run -c opt //tools/tokenize -- --tokenizer=gpt2          # fortunes -> token files
//   bazel run -c opt //tools/tokenize -- --tokenizer=byte --check  # and decode(encode) == text
//   bazel run -c opt //tools/tokenize -- --encode="Hello world"    # ids and pieces
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>

#include "data/text_data.h"
#include "data/tokenizer.h"
#include "tensor/check.h"

namespace {

using tessera::data::TextDataOptions;

constexpr const char* kUsage =
    "usage: tokenize [--corpus=fortunes|FILE] [--tokenizer=gpt2|byte] [--cache-dir=DIR]\n"
    "                [--check] [--encode=TEXT]\n"
    "  --corpus     the text (default fortunes, the Debian package's quotations)\n"
    "  --tokenizer  gpt2 (GPT-2's BPE, 50257 ids) or byte (256 ids); default gpt2\n"
    "  --cache-dir  where the token files go (default /var/cache/tessera/tokens)\n"
    "  --check      also check decode(encode(text)) == text on the whole corpus\n"
    "  --encode     print TEXT's token ids and pieces, and nothing else\n";

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void encode_one(const TextDataOptions& options, const std::string& text) {
  const auto tokenizer = tessera::data::make_tokenizer(options.tokenizer(), options.gpt2_dir());
  for (int32_t id : tokenizer->encode(text)) {
    std::cout << id << "\t\"" << tokenizer->decode({id}) << "\"\n";
  }
}

void check_round_trip(const TextDataOptions& options) {
  const tessera::data::TextCorpus corpus = tessera::data::read_corpus(options);
  const auto tokenizer = tessera::data::make_tokenizer(options.tokenizer(), options.gpt2_dir());
  const std::string text = corpus.train + corpus.val;
  const auto start = std::chrono::steady_clock::now();
  const std::vector<int32_t> ids = tokenizer->encode(text);
  const double encode_s = seconds_since(start);
  TS_CHECK(tokenizer->decode(ids) == text, "tokenize: decode(encode(corpus)) differs from the "
           "corpus");
  std::printf("check: decode(encode(text)) == text for all %zu bytes (%zu tokens, encoded in "
              "%.2f s by a fresh tokenizer)\n", text.size(), ids.size(), encode_s);
}

}  // namespace

int main(int argc, char** argv) {
  TextDataOptions options;
  bool check = false;
  std::string encode;
  bool encode_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&](const char* prefix) -> const char* {
      const std::string p = prefix;
      return arg.compare(0, p.size(), p) == 0 ? argv[i] + p.size() : nullptr;
    };
    if (const char* v = value("--corpus=")) {
      options.corpus(v);
    } else if (const char* v = value("--tokenizer=")) {
      options.tokenizer(v);
    } else if (const char* v = value("--cache-dir=")) {
      options.cache_dir(v);
    } else if (const char* v = value("--encode=")) {
      encode = v, encode_given = true;
    } else if (arg == "--check") {
      check = true;
    } else if (arg == "--help") {
      std::cout << kUsage;
      return 0;
    } else {
      std::cerr << "tokenize: unknown flag '" << arg << "'\n" << kUsage;
      return 2;
    }
  }
  try {
    if (encode_given) {
      encode_one(options, encode);
      return 0;
    }
    const auto start = std::chrono::steady_clock::now();
    const tessera::data::TextTokens tokens = tessera::data::load_text_tokens(options);
    const double load_s = seconds_since(start);
    std::printf("corpus %s, tokenizer %s (vocabulary %lld)\n", options.corpus().c_str(),
                options.tokenizer().c_str(), static_cast<long long>(tokens.vocab_size));
    std::printf("train: %zu tokens  %s\nval:   %zu tokens  %s\n", tokens.train->size(),
                tokens.train_file.empty() ? "(not stored)" : tokens.train_file.c_str(),
                tokens.val->size(),
                tokens.val_file.empty() ? "(not stored)" : tokens.val_file.c_str());
    std::printf("%s in %.2f s\n", tokens.tokenized ? "read and tokenized" : "read from the files",
                load_s);
    if (check) check_round_trip(options);
  } catch (const tessera::Error& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  return 0;
}
