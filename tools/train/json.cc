#include "tools/train/json.h"

#include <cmath>
#include <cstdio>

namespace tessera {
namespace train {

std::string json_string(const std::string& value) {
  std::string out = "\"";
  for (char c : value) {
    if (static_cast<unsigned char>(c) < 0x20) {  // JSON allows no raw newline, tab, ...
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
      continue;
    }
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string json_number(double value) {
  if (!std::isfinite(value)) return "null";  // JSON has no inf or nan
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.6g", value);
  return buf;
}

std::string json_number(int64_t value) { return std::to_string(value); }

std::string json_fixed(double value, int decimals) {
  if (!std::isfinite(value)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, value);
  return buf;
}

JsonArray& JsonArray::add_raw(std::string json) {
  elements_.push_back(std::move(json));
  return *this;
}

std::string JsonArray::str(const char* separator) const {
  std::string out = "[";
  for (size_t i = 0; i < elements_.size(); ++i) out += (i ? separator : "") + elements_[i];
  return out + "]";
}

JsonObject& JsonObject::add(const std::string& key, const std::string& value) {
  return add_raw(key, json_string(value));
}

JsonObject& JsonObject::add(const std::string& key, double value) {
  return add_raw(key, json_number(value));
}

JsonObject& JsonObject::add(const std::string& key, int64_t value) {
  return add_raw(key, json_number(value));
}

JsonObject& JsonObject::add_raw(const std::string& key, const std::string& json) {
  fields_.emplace_back(key, json);
  return *this;
}

std::string JsonObject::str() const {
  std::string out = "{";
  for (size_t i = 0; i < fields_.size(); ++i) {
    out += (i ? ", " : "") + json_string(fields_[i].first) + ": " + fields_[i].second;
  }
  return out + "}";
}

}  // namespace train
}  // namespace tessera
