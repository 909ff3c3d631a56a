// The train tool's JSON: the final summary line, the --metrics lines and each strategy's object
// inside the summary. Written, never parsed here (tools/explain and the tests read it back).
// One encoding for every value, wherever it stands: strings quoted and escaped, doubles as
// %.6g (null when not finite), integers exactly; objects "{"k": v, ...}" and arrays "[a, b]",
// in insertion order.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tessera {
namespace train {

// One value, encoded.
std::string json_string(const std::string& value);
std::string json_number(double value);
std::string json_number(int64_t value);
// A fraction written to a fixed number of decimals ("0.5800"), so per-rank figures line up.
std::string json_fixed(double value, int decimals);

// A JSON array, elements in insertion order.
class JsonArray {
 public:
  JsonArray() = default;
  // Every element of `values` (integers, doubles or strings), encoded as add() encodes it.
  template <typename T>
  explicit JsonArray(const std::vector<T>& values) {
    for (const T& v : values) add(v);
  }
  JsonArray& add(const std::string& value) { return add_raw(json_string(value)); }
  JsonArray& add(const char* value) { return add(std::string(value)); }
  JsonArray& add(double value) { return add_raw(json_number(value)); }
  JsonArray& add(int64_t value) { return add_raw(json_number(value)); }
  JsonArray& add(int value) { return add(static_cast<int64_t>(value)); }
  // An already-encoded JSON value (an object's str(), say).
  JsonArray& add_raw(std::string json);
  bool empty() const { return elements_.empty(); }
  // "[a, b, c]"; `separator` stands between elements (comm_per_step has always been written
  // with "," alone, and keeps it so that a run's JSON compares byte for byte with older runs').
  std::string str(const char* separator = ", ") const;

 private:
  std::vector<std::string> elements_;
};

// A flat JSON object, fields in insertion order.
class JsonObject {
 public:
  JsonObject& add(const std::string& key, const std::string& value);
  JsonObject& add(const std::string& key, const char* value) { return add(key, std::string(value)); }
  JsonObject& add(const std::string& key, double value);
  JsonObject& add(const std::string& key, int64_t value);
  JsonObject& add(const std::string& key, int value) { return add(key, static_cast<int64_t>(value)); }
  JsonObject& add(const std::string& key, const JsonArray& value) { return add_raw(key, value.str()); }
  // An already-encoded JSON value (a nested object's str(), say).
  JsonObject& add_raw(const std::string& key, const std::string& json);
  std::string str() const;

 private:
  std::vector<std::pair<std::string, std::string>> fields_;  // key -> encoded value
};

}  // namespace train
}  // namespace tessera
