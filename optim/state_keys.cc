#include "optim/state_keys.h"

namespace tessera {
namespace optim {
namespace {

constexpr char kPrefix[] = "state.";
constexpr size_t kPrefixLength = sizeof(kPrefix) - 1;

}  // namespace

std::string state_key_prefix(int64_t index) { return kPrefix + std::to_string(index) + "."; }

std::string state_key(int64_t index, const std::string& name) {
  return state_key_prefix(index) + name;
}

bool has_state_prefix(const std::string& key) { return key.compare(0, kPrefixLength, kPrefix) == 0; }

std::optional<StateKey> parse_state_key(const std::string& key) {
  if (!has_state_prefix(key)) return std::nullopt;
  const size_t dot = key.find('.', kPrefixLength);
  if (dot == std::string::npos || dot + 1 == key.size()) return std::nullopt;  // no NAME
  const std::string digits = key.substr(kPrefixLength, dot - kPrefixLength);
  // At most 18 digits: any such number fits in an int64_t.
  if (digits.empty() || digits.size() > 18 ||
      digits.find_first_not_of("0123456789") != std::string::npos ||
      (digits.size() > 1 && digits[0] == '0')) {
    return std::nullopt;
  }
  return StateKey{std::stoll(digits), key.substr(dot + 1)};
}

std::optional<StateKey> parse_state_key(const std::string& key, size_t count) {
  std::optional<StateKey> parsed = parse_state_key(key);
  if (parsed && static_cast<uint64_t>(parsed->index) >= count) return std::nullopt;
  return parsed;
}

}  // namespace optim
}  // namespace tessera
