#include "tools/json/json_writer.h"

#include <cmath>
#include <cstdio>

namespace tessera {
namespace json {

std::string quote(const std::string& value) {
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

std::string number(double value, int digits) {
  if (!std::isfinite(value)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*g", digits, value);
  return buf;
}

std::string number(int64_t value) { return std::to_string(value); }

std::string fixed(double value, int decimals) {
  if (!std::isfinite(value)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, value);
  return buf;
}

Array& Array::add_raw(std::string json) {
  elements_.push_back(std::move(json));
  return *this;
}

std::string Array::str() const {
  const char* separator = format_.compact ? "," : ", ";
  std::string out = "[";
  for (size_t i = 0; i < elements_.size(); ++i) out += (i ? separator : "") + elements_[i];
  return out + "]";
}

Object& Object::add_raw(const std::string& key, const std::string& json) {
  fields_.emplace_back(key, json);
  return *this;
}

std::string Object::str() const {
  const char* separator = format_.compact ? "," : ", ";
  const char* colon = format_.compact ? ":" : ": ";
  std::string out = "{";
  for (size_t i = 0; i < fields_.size(); ++i) {
    out += (i ? separator : "") + quote(fields_[i].first) + colon + fields_[i].second;
  }
  return out + "}";
}

}  // namespace json
}  // namespace tessera
