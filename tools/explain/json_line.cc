#include "tools/explain/json_line.h"

#include <cmath>
#include <cstdio>

namespace tessera {
namespace explain {

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

JsonLine& JsonLine::raw(const std::string& key, const std::string& json) {
  if (!body_.empty()) body_ += ",";
  body_ += json_string(key) + ":" + json;
  return *this;
}

JsonLine& JsonLine::add(const std::string& key, const std::string& value) {
  return raw(key, json_string(value));
}

JsonLine& JsonLine::add(const std::string& key, double value) {
  if (!std::isfinite(value)) return raw(key, "null");
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.10g", value);
  return raw(key, buf);
}

JsonLine& JsonLine::add(const std::string& key, int64_t value) {
  return raw(key, std::to_string(value));
}

JsonLine& JsonLine::add(const std::string& key, const std::vector<std::string>& values) {
  std::string json = "[";
  for (size_t i = 0; i < values.size(); ++i) json += (i ? "," : "") + json_string(values[i]);
  return raw(key, json + "]");
}

JsonLine& JsonLine::add(const std::string& key, const std::vector<int64_t>& values) {
  std::string json = "[";
  for (size_t i = 0; i < values.size(); ++i) json += (i ? "," : "") + std::to_string(values[i]);
  return raw(key, json + "]");
}

}  // namespace explain
}  // namespace tessera
