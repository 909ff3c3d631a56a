// JsonValue: a parsed JSON document (RFC 8259), for reading what tessera writes (a Chrome trace).
// Recursive descent over the text; numbers are doubles; objects keep their keys in order (a
// repeated key: the last one wins in get()).
//
//   JsonValue v = parse_json(R"({"traceEvents":[{"ts":1.5}]})");
//   v.get("traceEvents").at(0).get("ts").number()  ->  1.5
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tessera {
namespace explain {

class JsonValue {
 public:
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };

  Kind kind() const { return kind_; }
  bool is_object() const { return kind_ == Kind::kObject; }
  bool is_array() const { return kind_ == Kind::kArray; }
  bool is_number() const { return kind_ == Kind::kNumber; }
  bool is_string() const { return kind_ == Kind::kString; }
  // Typed reads; each throws naming the kind it found.
  double number() const;
  const std::string& string() const;
  const std::vector<JsonValue>& array() const;
  // Object members: has(key), get(key) (throws naming a missing key).
  bool has(const std::string& key) const;
  const JsonValue& get(const std::string& key) const;
  // get(key).number() / .string(), or `otherwise` when the key is missing.
  double number_or(const std::string& key, double otherwise) const;
  std::string string_or(const std::string& key, const std::string& otherwise) const;

 private:
  friend class JsonParser;
  Kind kind_ = Kind::kNull;
  bool boolean_ = false;
  double number_ = 0;
  std::string string_;
  std::vector<JsonValue> items_;
  std::vector<std::pair<std::string, JsonValue>> members_;
};

// Throws naming the offset and what was expected when `text` is not one JSON value.
JsonValue parse_json(const std::string& text);

}  // namespace explain
}  // namespace tessera
