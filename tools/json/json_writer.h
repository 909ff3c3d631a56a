// JSON written by the command-line tools: the train tool's summary line, its --metrics lines and
// each strategy's object in the summary; explain's --json rows (JSON Lines). Written, never
// parsed here (the tools read JSON with nlohmann-json; the tests read both tools' output back).
// Kept by hand rather than nlohmann-json's dump(): that has no spaced one-line layout and writes
// doubles with every digit a read-back needs (0.30000000000000004), where these lines are read
// by people too.
//
// One encoding for every value, wherever it stands: strings quoted and escaped; doubles with
// Format::digits significant digits (%.*g), null when not finite (JSON has no inf or NaN);
// integers exactly. Objects and arrays keep insertion order, spaced ({"k": v, "l": [1, 2]}) or
// compact ({"k":v,"l":[1,2]}):
//
//   json::Object().add("ranks", 8).add("algorithm", "ring").str()
//       -> {"ranks": 8, "algorithm": "ring"}
//   json::Object({10, true}).add("bubble", 3.0 / 11).str()  ->  {"bubble":0.2727272727}
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tessera {
namespace json {

struct Format {
  int digits = 6;        // significant digits of a double
  bool compact = false;  // "," and ":" alone between elements, no spaces
};

// One value, encoded.
std::string quote(const std::string& value);
std::string number(double value, int digits = Format().digits);
std::string number(int64_t value);
// A fraction written to a fixed number of decimals ("0.5800"), so per-rank figures line up.
std::string fixed(double value, int decimals);

// A JSON array.
class Array {
 public:
  explicit Array(Format format = {}) : format_(format) {}
  // Every element of `values` (integers, doubles or strings), encoded as add() encodes it.
  template <typename T>
  explicit Array(const std::vector<T>& values, Format format = {}) : format_(format) {
    for (const T& v : values) add(v);
  }
  Array& add(const std::string& value) { return add_raw(quote(value)); }
  Array& add(const char* value) { return add(std::string(value)); }
  Array& add(double value) { return add_raw(number(value, format_.digits)); }
  Array& add(int64_t value) { return add_raw(number(value)); }
  Array& add(int value) { return add(static_cast<int64_t>(value)); }
  // An already-encoded JSON value (an object's str(), say).
  Array& add_raw(std::string json);
  bool empty() const { return elements_.empty(); }
  std::string str() const;

 private:
  Format format_;
  std::vector<std::string> elements_;
};

// A JSON object.
class Object {
 public:
  explicit Object(Format format = {}) : format_(format) {}
  Object& add(const std::string& key, const std::string& value) { return add_raw(key, quote(value)); }
  Object& add(const std::string& key, const char* value) { return add(key, std::string(value)); }
  Object& add(const std::string& key, double value) {
    return add_raw(key, number(value, format_.digits));
  }
  Object& add(const std::string& key, int64_t value) { return add_raw(key, number(value)); }
  Object& add(const std::string& key, int value) { return add(key, static_cast<int64_t>(value)); }
  Object& add(const std::string& key, const Array& value) { return add_raw(key, value.str()); }
  // A list of integers, doubles or strings, as an array in this object's format.
  template <typename T>
  Object& add(const std::string& key, const std::vector<T>& values) {
    return add(key, Array(values, format_));
  }
  // An already-encoded JSON value (a nested object's str(), say).
  Object& add_raw(const std::string& key, const std::string& json);
  std::string str() const;

 private:
  Format format_;
  std::vector<std::pair<std::string, std::string>> fields_;  // key -> encoded value
};

}  // namespace json
}  // namespace tessera
