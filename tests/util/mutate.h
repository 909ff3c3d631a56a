// Seeded byte mutations for the parser fuzz tests (safetensors, IDX): start from a valid file,
// apply a few random edits, and check the parser either accepts the result or throws
// tessera::Error. The edits are those that find parser bugs in practice (AFL's and libFuzzer's
// havoc stage): bit flips, "interesting" byte values, truncation, inserted and deleted runs,
// copied chunks, dictionary tokens (format keywords the parser branches on), and rewrites of
// the format's length fields with boundary values (0, 1, +-1 of the current value, 2^31, 2^32,
// 2^63, 2^64 - 1, the file size), little- or big-endian as the format stores them.
#pragma once

#include <cctype>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace tessera {
namespace testing {

// A length or count field of the format: `width` bytes at `offset`.
struct LengthField {
  size_t offset;
  int width;  // 1, 2, 4 or 8
  bool big_endian;
};

class Mutator {
 public:
  Mutator(uint64_t seed, std::vector<std::string> tokens, std::vector<LengthField> fields)
      : rng_(seed), tokens_(std::move(tokens)), fields_(std::move(fields)) {}

  // Applies `count` random edits to `bytes`.
  void mutate(std::string& bytes, int count) {
    for (int i = 0; i < count; ++i) mutate_once(bytes);
  }

  uint64_t below(uint64_t n) { return n == 0 ? 0 : rng_() % n; }

 private:
  void mutate_once(std::string& b) {
    switch (below(9)) {
      case 0:  // flip one bit
        if (!b.empty()) b[below(b.size())] ^= static_cast<char>(1u << below(8));
        break;
      case 1: {  // an interesting byte value
        static const unsigned char kValues[] = {0, 1, 0x7F, 0x80, 0xFF, '"', '\\', ',', '9'};
        if (!b.empty()) b[below(b.size())] = static_cast<char>(kValues[below(sizeof(kValues))]);
        break;
      }
      case 2:  // truncate
        b.resize(below(b.size() + 1));
        break;
      case 3: {  // insert random bytes
        std::string run(1 + below(8), '\0');
        for (char& c : run) c = static_cast<char>(below(256));
        b.insert(below(b.size() + 1), run);
        break;
      }
      case 4: {  // delete a run
        if (b.empty()) break;
        const size_t at = below(b.size());
        b.erase(at, 1 + below(std::min<size_t>(16, b.size() - at)));
        break;
      }
      case 5: {  // copy a chunk over or into another place
        if (b.empty()) break;
        const size_t from = below(b.size());
        const std::string chunk = b.substr(from, 1 + below(32));
        const size_t to = below(b.size() + 1);
        if (below(2) == 0) {
          b.insert(to, chunk);
        } else {
          b.replace(to, chunk.size(), chunk);
        }
        break;
      }
      case 6:  // a dictionary token, inserted or overwriting
        if (!tokens_.empty()) {
          const std::string& t = tokens_[below(tokens_.size())];
          const size_t at = below(b.size() + 1);
          if (below(2) == 0) {
            b.insert(at, t);
          } else {
            b.replace(at, t.size(), t);
          }
        }
        break;
      default:  // a length field set to a boundary value (twice as likely as the others)
        edit_length(b);
        break;
    }
  }

  void edit_length(std::string& b) {
    LengthField f = {below(b.size() + 1), static_cast<int>(1u << below(4)), below(2) == 0};
    if (!fields_.empty() && below(4) != 0) f = fields_[below(fields_.size())];
    if (f.offset + f.width > b.size()) return;
    uint64_t current = 0;
    for (int k = 0; k < f.width; ++k) {
      const size_t at = f.offset + (f.big_endian ? k : f.width - 1 - k);
      current = (current << 8) | static_cast<unsigned char>(b[at]);
    }
    const uint64_t candidates[] = {0,          1,           current + 1,         current - 1,
                                   current * 2, current / 2, uint64_t{1} << 31,   uint64_t{1} << 32,
                                   uint64_t{1} << 63,        ~uint64_t{0},        b.size(),
                                   current + 8,              current - 8,         below(1u << 16)};
    const uint64_t v = candidates[below(sizeof(candidates) / sizeof(candidates[0]))];
    for (int k = 0; k < f.width; ++k) {
      const size_t at = f.offset + (f.big_endian ? f.width - 1 - k : k);
      b[at] = static_cast<char>((v >> (8 * k)) & 0xFF);
    }
  }

  std::mt19937_64 rng_;
  std::vector<std::string> tokens_;
  std::vector<LengthField> fields_;
};

// An error message without the file name (the first quoted text), quoted names, numbers (hex
// too) and shapes: which check fired, for the fuzz tests' logs.
inline std::string message_kind(const std::string& m) {
  std::string out;
  char closing = 0;  // inside '...' or [...] until this
  for (size_t i = m.find('\'', m.find('\'') + 1) + 1; i < m.size() && out.size() < 90; ++i) {
    const char c = m[i];
    if (closing != 0) {
      if (c == closing) closing = 0;
    } else if (c == '\'' || c == '[') {
      closing = c == '[' ? ']' : '\'';
      out += c == '[' ? "[_]" : "'_'";
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      while (i + 1 < m.size() && std::isalnum(static_cast<unsigned char>(m[i + 1]))) ++i;
      out += 'N';
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace testing
}  // namespace tessera
