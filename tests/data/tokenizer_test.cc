// The byte-level tokenizer, and make_tokenizer's names.
#include "data/tokenizer.h"

#include <gtest/gtest.h>

#include "data/byte_tokenizer.h"
#include "tests/data/installed_text_files.h"
#include "tests/util/expect_error.h"

namespace tessera {
namespace data {
namespace {

TEST(ByteTokenizer, TokenIsTheByteValue) {
  const ByteTokenizer tok;
  EXPECT_EQ(tok.vocab_size(), 256);
  EXPECT_EQ(tok.encode("Hi\n"), (std::vector<int32_t>{72, 105, 10}));
  EXPECT_EQ(tok.encode("é"), (std::vector<int32_t>{0xC3, 0xA9}));  // UTF-8's two bytes
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  EXPECT_EQ(tok.decode(tok.encode(all)), all);
  tessera::testing::expect_error([&] { tok.decode({65, 256}); },
                                 "token 1 is 256, outside [0, 256)");
}

TEST(MakeTokenizer, ByNameAndUnknownNamesRefused) {
  EXPECT_EQ(make_tokenizer("byte")->name(), "byte");
  tessera::testing::expect_error([] { make_tokenizer("gpt4"); },
                                 "unknown tokenizer \"gpt4\" (expected \"gpt2\" or \"byte\")");
  if (!tessera::testing::gpt2_files_installed()) return;
  const auto gpt2 = make_tokenizer("gpt2");
  EXPECT_EQ(gpt2->name(), "gpt2");
  EXPECT_EQ(gpt2->vocab_size(), 50257);
}

}  // namespace
}  // namespace data
}  // namespace tessera
