// The text corpus and its stored tokens: fortune files cut into quotations, the every-tenth
// validation split, a text file's 90/10 split, and token files written once, read after, and
// keyed by the corpus's content and the tokenizer.
#include "data/text_data.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "data/token_file.h"
#include "tests/data/installed_text_files.h"
#include "tests/util/expect_error.h"
#include "tests/util/test_util.h"

namespace tessera {
namespace data {
namespace {

using tessera::testing::temp_path;

TEST(SplitFortunes, PercentLinesSeparateQuotationsAndOverstrikesGo) {
  const std::string file =
      "\"If it ain't broke, don't fix it.\"\n\t\t-- Bert Lantz\n%\n"
      "%\n"                                 // an empty quotation is no quotation
      "An _\bu_\bn_\bd_\be_\br_\bl_\bi_\bn_\be_\bd word.\n%.not a separator\n%\n"
      "B\bBo\bol\bld\bd, and no final separator";
  EXPECT_EQ(split_fortunes(file),
            (std::vector<std::string>{"\"If it ain't broke, don't fix it.\"\n\t\t-- Bert Lantz\n",
                                      "An underlined word.\n%.not a separator\n",
                                      "Bold, and no final separator\n"}));
}

TEST(FortunesCorpus, EveryTenthQuotationIsValidation) {
  if (!tessera::testing::fortunes_installed()) return;
  const TextCorpus corpus = fortunes_corpus();
  EXPECT_EQ(corpus.name, "fortunes");
  // Quotations in file order; the 10th, 20th, ... are validation. Each ends in a blank line.
  std::vector<std::string> quotes;
  for (const std::string& file : kFortuneFiles) {
    std::ifstream in(std::string(kFortunesDir) + "/" + file, std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    for (const std::string& q : split_fortunes(text)) quotes.push_back(q + "\n");
  }
  std::string train, val;
  for (size_t i = 0; i < quotes.size(); ++i) ((i + 1) % 10 == 0 ? val : train) += quotes[i];
  EXPECT_EQ(corpus.train, train);
  EXPECT_EQ(corpus.val, val);
  // Debian 12's fortunes 1:1.99.1-7.3: 15,217 quotations, 2.56 MB once cut.
  EXPECT_GT(quotes.size(), 15000u);
  EXPECT_GT(corpus.train.size() + corpus.val.size(), 2000000u);
  EXPECT_EQ(corpus.train.find('\b'), std::string::npos);
  EXPECT_EQ(corpus.train.find("\n%\n"), std::string::npos);
}

TEST(FortunesCorpus, MissingFilesSayHowToInstallThem) {
  tessera::testing::expect_error([] { fortunes_corpus(temp_path("no_fortunes")); },
                                 "no_fortunes/art'");
  tessera::testing::expect_error([] { fortunes_corpus(temp_path("no_fortunes")); },
                                 "tools/setup.sh");
}

std::string write_text(const std::string& name, const std::string& text) {
  const std::string path = temp_path(name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

TEST(TextFileCorpus, LastTenthFromALineStartIsValidation) {
  // 20 lines of 10 bytes: the last tenth starts at byte 180, a line start.
  std::string text;
  for (int i = 0; i < 20; ++i) text += "line " + std::to_string(1000 + i) + "\n";
  ASSERT_EQ(text.size(), 200u);
  const TextCorpus corpus = text_file_corpus(write_text("lines.txt", text));
  EXPECT_EQ(corpus.name, "lines.txt");
  EXPECT_EQ(corpus.val, "line 1018\nline 1019\n");
  EXPECT_EQ(corpus.train + corpus.val, text);
  // 31 bytes: the last tenth starts at byte 28, inside "bb"; validation starts at the next line.
  const std::string cut_mid_line = std::string(25, 'a') + "\nbb\nc\n";
  const TextCorpus shifted = text_file_corpus(write_text("shifted.txt", cut_mid_line));
  EXPECT_EQ(shifted.train, std::string(25, 'a') + "\nbb\n");
  EXPECT_EQ(shifted.val, "c\n");
  tessera::testing::expect_error([] { text_file_corpus(write_text("one.txt", "one line")); },
                                 "has no line starting in its last tenth");
}

bool exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

TEST(LoadTextTokens, TokenizesOnceThenReadsTheStoredFiles) {
  std::string text;
  for (int i = 0; i < 50; ++i) text += "quote " + std::to_string(i) + "\n";
  const std::string cache = temp_path("token_cache");
  const TextDataOptions options =
      TextDataOptions().corpus(write_text("quotes.txt", text)).tokenizer("byte").cache_dir(cache);

  const TextTokens first = load_text_tokens(options);
  EXPECT_TRUE(first.tokenized);
  EXPECT_EQ(first.vocab_size, 256);
  ASSERT_TRUE(exists(first.train_file) && exists(first.val_file)) << first.train_file;
  EXPECT_EQ(first.train_file.rfind(cache + "/quotes.txt-", 0), 0u) << first.train_file;
  EXPECT_NE(first.train_file.find("-byte-train.bin"), std::string::npos) << first.train_file;
  const TextCorpus corpus = read_corpus(options);
  EXPECT_EQ(std::string(first.train->begin(), first.train->end()), corpus.train);
  EXPECT_EQ(std::string(first.val->begin(), first.val->end()), corpus.val);

  const TextTokens second = load_text_tokens(options);
  EXPECT_FALSE(second.tokenized);
  EXPECT_EQ(second.train_file, first.train_file);
  EXPECT_EQ(*second.train, *first.train);
  EXPECT_EQ(*second.val, *first.val);

  // A damaged stored file is an error naming it, not tokens read wrong.
  std::ofstream(first.val_file, std::ios::binary | std::ios::app) << "x";
  tessera::testing::expect_error([&] { load_text_tokens(options); }, first.val_file);

  // Another text under the same name is another corpus: new files, the old ones untouched.
  const TextTokens changed = load_text_tokens(
      TextDataOptions(options).corpus(write_text("quotes.txt", text + "one more\n")));
  EXPECT_TRUE(changed.tokenized);
  EXPECT_NE(changed.train_file, first.train_file);
  EXPECT_TRUE(exists(first.train_file));
}

TEST(LoadTextTokens, WithoutACacheDirectoryNothingIsStored) {
  const std::string path = write_text("short.txt", "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\n");
  const TextTokens tokens =
      load_text_tokens(TextDataOptions().corpus(path).tokenizer("byte").cache_dir(""));
  EXPECT_TRUE(tokens.tokenized);
  EXPECT_TRUE(tokens.train_file.empty());
  EXPECT_EQ(tokens.train->size() + tokens.val->size(), 20u);
}

TEST(LoadTextTokens, Gpt2TokensOfTheFortunesDecodeToTheCorpus) {
  if (!tessera::testing::gpt2_files_installed() || !tessera::testing::fortunes_installed()) return;
  const TextDataOptions options = TextDataOptions().cache_dir(temp_path("gpt2_cache"));
  const TextTokens tokens = load_text_tokens(options);
  EXPECT_EQ(tokens.vocab_size, 50257);
  const auto tokenizer = make_tokenizer("gpt2");
  const TextCorpus corpus = read_corpus(options);
  EXPECT_EQ(tokenizer->decode(std::vector<int32_t>(tokens.val->begin(), tokens.val->end())),
            corpus.val);
  EXPECT_EQ(*tokens.train, read_token_file(tokens.train_file));
}

}  // namespace
}  // namespace data
}  // namespace tessera
