// GPT-2's pre-tokenizer: the text is cut into words before BPE merges bytes, and no merge ever
// crosses a cut. OpenAI's encoder.py cuts with one regular expression,
//
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// tried alternative by alternative, leftmost first, at each position. Here it is a hand scanner
// that does the same without a regex library. At each position it takes the first that applies:
//
//   1. an English contraction: 's 't 're 've 'm 'll 'd (lower case only, as the regex);
//   2. an optional single space (U+0020) and then a run of one class: letters, or numbers, or
//      "other" (neither letter, number nor white space: punctuation, symbols, controls);
//   3. a run of white space: all of it at the end of the text; before a non-space, all but its
//      last character (the (?!\S) lookahead backtracks by one), which then starts the next word
//      (a space joins that word by rule 2, a newline stands alone);
//
//   "Hello, world!  It's 42"  ->  "Hello" "," " world" "!" " " " It" "'s" " 42"
//
// Characters are classified after decoding UTF-8 (data/unicode_classes.h: Unicode's letter and
// number categories, exactly, for every code point assigned in Unicode 14). A byte that does not
// start a valid UTF-8 sequence counts as one "other" character: any bytes are cut, and the words
// always concatenate back to the text.
#pragma once

#include <string_view>
#include <vector>

namespace tessera {
namespace data {

// The words of `text`, in order, as views into it.
std::vector<std::string_view> pretokenize(std::string_view text);

}  // namespace data
}  // namespace tessera
