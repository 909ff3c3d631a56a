// GPT-2's pre-tokenizer as a literal table: each text and the words OpenAI's regex cuts it into
// (checked against the npm package gpt-3-encoder's JavaScript regex, which is the same pattern).
#include "data/pretokenize.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "data/unicode_classes.h"

namespace tessera {
namespace data {
namespace {

std::vector<std::string> words(const std::string& text) {
  std::vector<std::string> out;
  for (std::string_view w : pretokenize(text)) out.emplace_back(w);
  return out;
}

using Words = std::vector<std::string>;

TEST(Pretokenize, LettersNumbersAndOtherRunsTakeOneLeadingSpace) {
  EXPECT_EQ(words("Hello world"), (Words{"Hello", " world"}));
  EXPECT_EQ(words("Hello, world!"), (Words{"Hello", ",", " world", "!"}));
  EXPECT_EQ(words("in 2024 we"), (Words{"in", " 2024", " we"}));
  EXPECT_EQ(words("abc123def"), (Words{"abc", "123", "def"}));
  EXPECT_EQ(words("wait... what?!"), (Words{"wait", "...", " what", "?!"}));
  EXPECT_EQ(words("a (b) c"), (Words{"a", " (", "b", ")", " c"}));
}

TEST(Pretokenize, ContractionsOnlyInLowerCaseAndOnlyWhereAWordStarts) {
  EXPECT_EQ(words("It's I'm we're you've he'll she'd don't"),
            (Words{"It", "'s", " I", "'m", " we", "'re", " you", "'ve", " he", "'ll", " she",
                   "'d", " don", "'t"}));
  EXPECT_EQ(words("IT'S"), (Words{"IT", "'", "S"}));  // upper case: no contraction
  // Inside a run of "other" characters the apostrophe is just another one.
  EXPECT_EQ(words("...'s"), (Words{"...'", "s"}));
  EXPECT_EQ(words(" 's"), (Words{" '", "s"}));
  EXPECT_EQ(words("'hello'"), (Words{"'", "hello", "'"}));
}

TEST(Pretokenize, WhiteSpaceRunsLeaveTheirLastSpaceToTheNextWord) {
  EXPECT_EQ(words("a  b   c"), (Words{"a", " ", " b", "  ", " c"}));
  EXPECT_EQ(words("end   "), (Words{"end", "   "}));  // at the end: the whole run
  EXPECT_EQ(words("\n\nHello\n\n"), (Words{"\n", "\n", "Hello", "\n\n"}));
  EXPECT_EQ(words("x\ty"), (Words{"x", "\t", "y"}));  // only U+0020 joins a word
  EXPECT_EQ(words(" \n x"), (Words{" \n", " x"}));
  EXPECT_EQ(words("   "), (Words{"   "}));
  EXPECT_EQ(words(""), (Words{}));
}

TEST(Pretokenize, NonAsciiLettersAndNumbersAreClassifiedAfterDecodingUtf8) {
  EXPECT_EQ(words("café au lait"), (Words{"café", " au", " lait"}));
  EXPECT_EQ(words("naïve résumé 中文 ²½"),
            (Words{"naïve", " résumé", " 中文", " ²½"}));
  EXPECT_EQ(words("A—B"), (Words{"A", "—", "B"}));  // an em dash is "other"
  // U+00A0 (no-break space) is white space, but only U+0020 joins the next word.
  EXPECT_EQ(words("a\u00A0b"), (Words{"a", "\u00A0", "b"}));
}

TEST(Pretokenize, InvalidUtf8BytesAreOtherCharactersAndNothingIsLost) {
  const std::string text = "ab\xff\xfe cd\xc3";  // two stray bytes, and a sequence cut short
  EXPECT_EQ(words(text), (Words{"ab", "\xff\xfe", " cd", "\xc3"}));
  std::string joined;
  for (const std::string& w : words(text)) joined += w;
  EXPECT_EQ(joined, text);
}

TEST(UnicodeClasses, LettersNumbersAndSpaces) {
  EXPECT_TRUE(is_unicode_letter(U'é'));
  EXPECT_TRUE(is_unicode_letter(U'Ж'));
  EXPECT_TRUE(is_unicode_letter(U'中'));
  EXPECT_FALSE(is_unicode_letter(U'—'));
  EXPECT_FALSE(is_unicode_letter(U'7'));
  EXPECT_TRUE(is_unicode_number(U'7'));
  EXPECT_TRUE(is_unicode_number(U'²'));
  EXPECT_TRUE(is_unicode_number(U'٣'));  // Arabic-Indic three
  EXPECT_FALSE(is_unicode_number(U'x'));
  EXPECT_TRUE(is_unicode_space(U'\u3000'));
  EXPECT_FALSE(is_unicode_space(U'x'));
}

}  // namespace
}  // namespace data
}  // namespace tessera
