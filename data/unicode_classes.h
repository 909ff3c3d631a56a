// The three character classes GPT-2's pre-tokenizer tells apart (data/pretokenize.h): letters
// (\p{L}), numbers (\p{N}) and white space (\s), for any Unicode code point.
//
// Letters and numbers come from a table of code point ranges generated from Unicode's character
// database (data/unicode_classes.cc, by tools/tokenize/unicode_classes.py): exact for every code
// point assigned in Unicode 14, with no dependence on the process's locale (iswalpha would
// depend on it, and glibc's "alpha" also counts non-ASCII digits as letters).
#pragma once

namespace tessera {
namespace data {

// Unicode's general category L (Lu, Ll, Lt, Lm, Lo): "é", "ß", "Ж", "中".
bool is_unicode_letter(char32_t c);
// Unicode's general category N (Nd, Nl, No): "7", "٣", "²", "½", "Ⅻ".
bool is_unicode_number(char32_t c);

// Unicode's White_Space property, as Python's `regex` module (which GPT-2's encoder.py uses)
// matches \s: ASCII \t \n \v \f \r and space, U+0085, no-break space U+00A0, U+1680,
// U+2000-U+200A, the line and paragraph separators U+2028/U+2029, U+202F, U+205F, U+3000.
// (JavaScript's \s, which the npm package uses, differs on two: it has U+FEFF, not U+0085.)
inline bool is_unicode_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

}  // namespace data
}  // namespace tessera
