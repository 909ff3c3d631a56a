#include "data/pretokenize.h"

#include <cstdint>

#include "data/unicode_classes.h"

namespace tessera {
namespace data {

namespace {

enum class Class { kLetter, kNumber, kSpace, kOther };

struct Char {
  char32_t code;
  size_t bytes;  // its length in the text
  Class kind;
};

// The code point starting at text[i]. Overlong forms, surrogates and values past U+10FFFF are
// not valid UTF-8: their first byte is taken alone, as an "other" character.
Char decode_utf8(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(text[k]); };
  const uint8_t b0 = byte(i);
  char32_t code = b0;
  size_t n = 1;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2, code = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3, code = b0 & 0x0F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4, code = b0 & 0x07;
  }
  bool valid = b0 < 0x80 || n > 1;
  if (n > 1) {
    if (i + n > text.size()) valid = false;
    for (size_t k = 1; valid && k < n; ++k) {
      valid = (byte(i + k) & 0xC0) == 0x80;
      code = (code << 6) | (byte(i + k) & 0x3F);
    }
    const char32_t smallest[] = {0, 0, 0x80, 0x800, 0x10000};
    valid = valid && code >= smallest[n] && code <= 0x10FFFF && !(code >= 0xD800 && code <= 0xDFFF);
  }
  if (!valid) return {b0, 1, Class::kOther};
  const Class kind = is_unicode_letter(code)   ? Class::kLetter
                     : is_unicode_number(code) ? Class::kNumber
                     : is_unicode_space(code)  ? Class::kSpace
                                               : Class::kOther;
  return {code, n, kind};
}

// The length of the contraction ('s 't 're 've 'm 'll 'd) at text[i], or 0.
size_t contraction(std::string_view text, size_t i) {
  if (text[i] != '\'') return 0;
  const std::string_view rest = text.substr(i + 1);
  for (std::string_view suffix : {"s", "t", "re", "ve", "m", "ll", "d"}) {
    if (rest.substr(0, suffix.size()) == suffix) return 1 + suffix.size();
  }
  return 0;
}

// Where the run of characters of class `kind` that starts at `i` ends.
size_t run_end(std::string_view text, size_t i, Class kind) {
  while (i < text.size()) {
    const Char c = decode_utf8(text, i);
    if (c.kind != kind) break;
    i += c.bytes;
  }
  return i;
}

// The length of the word at text[i] (rules 1-3 of the header).
size_t word_length(std::string_view text, size_t i) {
  if (const size_t n = contraction(text, i)) return n;
  const Char c = decode_utf8(text, i);
  if (c.kind != Class::kSpace) return run_end(text, i, c.kind) - i;
  if (c.code == ' ' && i + 1 < text.size()) {
    const Char next = decode_utf8(text, i + 1);
    if (next.kind != Class::kSpace) return run_end(text, i + 1, next.kind) - i;
  }
  // White space: find the run's last character; all of the run at the end of the text, else
  // the run without that last character, or that single character when it is the whole run.
  size_t last = i, end = i;
  while (end < text.size()) {
    const Char s = decode_utf8(text, end);
    if (s.kind != Class::kSpace) break;
    last = end;
    end += s.bytes;
  }
  if (end == text.size() || last == i) return end - i;
  return last - i;
}

}  // namespace

std::vector<std::string_view> pretokenize(std::string_view text) {
  std::vector<std::string_view> words;
  for (size_t i = 0; i < text.size();) {
    const size_t n = word_length(text, i);
    words.push_back(text.substr(i, n));
    i += n;
  }
  return words;
}

}  // namespace data
}  // namespace tessera
