// JsonLine: one JSON object on one line (explain's --json prints one per row, JSON Lines), built
// key by key in order. Strings are escaped; numbers print with enough digits to read back;
// non-finite numbers print as null (JSON has no inf or NaN).
//
//   JsonLine().add("ranks", 8).add("algorithm", "ring").str()  ->  {"ranks":8,"algorithm":"ring"}
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera {
namespace explain {

class JsonLine {
 public:
  JsonLine& add(const std::string& key, const std::string& value);
  JsonLine& add(const std::string& key, const char* value) { return add(key, std::string(value)); }
  JsonLine& add(const std::string& key, double value);
  JsonLine& add(const std::string& key, int64_t value);
  JsonLine& add(const std::string& key, int value) { return add(key, static_cast<int64_t>(value)); }
  JsonLine& add(const std::string& key, const std::vector<std::string>& values);
  JsonLine& add(const std::string& key, const std::vector<int64_t>& values);
  std::string str() const { return "{" + body_ + "}"; }

 private:
  JsonLine& raw(const std::string& key, const std::string& json);
  std::string body_;
};

std::string json_string(const std::string& s);  // quoted and escaped

}  // namespace explain
}  // namespace tessera
