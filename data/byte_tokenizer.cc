#include "data/byte_tokenizer.h"

#include "tensor/check.h"

namespace tessera {
namespace data {

std::vector<int32_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> tokens(text.size());
  for (size_t i = 0; i < text.size(); ++i) tokens[i] = static_cast<unsigned char>(text[i]);
  return tokens;
}

std::string ByteTokenizer::decode(const std::vector<int32_t>& tokens) const {
  std::string text(tokens.size(), '\0');
  for (size_t i = 0; i < tokens.size(); ++i) {
    TS_CHECK(tokens[i] >= 0 && tokens[i] < 256, "ByteTokenizer::decode: token ", i, " is ",
             tokens[i], ", outside [0, 256)");
    text[i] = static_cast<char>(tokens[i]);
  }
  return text;
}

}  // namespace data
}  // namespace tessera
