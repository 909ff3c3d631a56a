#include "tools/explain/json_value.h"

#include <cstdlib>

#include "tensor/check.h"

namespace tessera {
namespace explain {
namespace {

const char* kind_name(JsonValue::Kind k) {
  switch (k) {
    case JsonValue::Kind::kNull: return "null";
    case JsonValue::Kind::kBool: return "a boolean";
    case JsonValue::Kind::kNumber: return "a number";
    case JsonValue::Kind::kString: return "a string";
    case JsonValue::Kind::kArray: return "an array";
    case JsonValue::Kind::kObject: return "an object";
  }
  return "?";
}

}  // namespace

class JsonParser {
 public:
  explicit JsonParser(const std::string& text) : s_(text) {}

  JsonValue document() {
    JsonValue v = value();
    space();
    TS_CHECK(at_ == s_.size(), "JSON: unexpected '", s_[at_], "' after the value at offset ", at_);
    return v;
  }

 private:
  void space() {
    while (at_ < s_.size() && (s_[at_] == ' ' || s_[at_] == '\n' || s_[at_] == '\t' || s_[at_] == '\r')) ++at_;
  }
  char peek() {
    space();
    TS_CHECK(at_ < s_.size(), "JSON: the text ends at offset ", at_, " where a value or ",
             "a closing bracket was expected");
    return s_[at_];
  }
  void expect(char c) {
    TS_CHECK(peek() == c, "JSON: expected '", c, "' at offset ", at_, ", found '", s_[at_], "'");
    ++at_;
  }
  bool literal(const char* word) {
    const std::string w(word);
    if (s_.compare(at_, w.size(), w) != 0) return false;
    at_ += w.size();
    return true;
  }

  JsonValue value() {
    JsonValue v;
    const char c = peek();
    if (c == '{') {
      v.kind_ = JsonValue::Kind::kObject;
      ++at_;
      if (peek() == '}') return ++at_, v;
      for (;;) {
        TS_CHECK(peek() == '"', "JSON: expected a key (a string) at offset ", at_);
        std::string key = string();
        expect(':');
        v.members_.emplace_back(std::move(key), value());
        if (peek() == '}') return ++at_, v;
        expect(',');
      }
    }
    if (c == '[') {
      v.kind_ = JsonValue::Kind::kArray;
      ++at_;
      if (peek() == ']') return ++at_, v;
      for (;;) {
        v.items_.push_back(value());
        if (peek() == ']') return ++at_, v;
        expect(',');
      }
    }
    if (c == '"') {
      v.kind_ = JsonValue::Kind::kString;
      v.string_ = string();
      return v;
    }
    if (literal("true") || literal("false")) {
      v.kind_ = JsonValue::Kind::kBool;
      v.boolean_ = s_[at_ - 1] == 'e' && s_[at_ - 2] == 'u';  // "true", not "false"
      return v;
    }
    if (literal("null")) return v;
    const char* begin = s_.c_str() + at_;
    char* end = nullptr;
    v.number_ = std::strtod(begin, &end);
    TS_CHECK(end != begin, "JSON: expected a value at offset ", at_, ", found '", c, "'");
    v.kind_ = JsonValue::Kind::kNumber;
    at_ += end - begin;
    return v;
  }

  std::string string() {
    expect('"');
    std::string out;
    while (at_ < s_.size() && s_[at_] != '"') {
      char c = s_[at_++];
      if (c == '\\') {
        TS_CHECK(at_ < s_.size(), "JSON: the text ends inside a string");
        const char e = s_[at_++];
        switch (e) {
          case 'n': c = '\n'; break;
          case 't': c = '\t'; break;
          case 'r': c = '\r'; break;
          case 'b': c = '\b'; break;
          case 'f': c = '\f'; break;
          case 'u': {
            TS_CHECK(at_ + 4 <= s_.size(), "JSON: a short \\u escape at offset ", at_);
            const long code = std::strtol(s_.substr(at_, 4).c_str(), nullptr, 16);
            at_ += 4;
            c = code < 128 ? static_cast<char>(code) : '?';  // what we read is ASCII
            break;
          }
          default: c = e;  // \" \\ \/
        }
      }
      out += c;
    }
    TS_CHECK(at_ < s_.size(), "JSON: a string is not closed before the end of the text");
    ++at_;
    return out;
  }

  const std::string& s_;
  size_t at_ = 0;
};

double JsonValue::number() const {
  TS_CHECK(is_number(), "JSON: expected a number, found ", kind_name(kind_));
  return number_;
}

const std::string& JsonValue::string() const {
  TS_CHECK(is_string(), "JSON: expected a string, found ", kind_name(kind_));
  return string_;
}

const std::vector<JsonValue>& JsonValue::array() const {
  TS_CHECK(is_array(), "JSON: expected an array, found ", kind_name(kind_));
  return items_;
}

bool JsonValue::has(const std::string& key) const {
  for (const auto& [k, v] : members_) {
    if (k == key) return true;
  }
  return false;
}

const JsonValue& JsonValue::get(const std::string& key) const {
  TS_CHECK(is_object(), "JSON: expected an object with \"", key, "\", found ", kind_name(kind_));
  const JsonValue* found = nullptr;
  for (const auto& [k, v] : members_) {
    if (k == key) found = &v;
  }
  TS_CHECK(found != nullptr, "JSON: the object has no \"", key, "\"");
  return *found;
}

double JsonValue::number_or(const std::string& key, double otherwise) const {
  return has(key) ? get(key).number() : otherwise;
}

std::string JsonValue::string_or(const std::string& key, const std::string& otherwise) const {
  return has(key) ? get(key).string() : otherwise;
}

JsonValue parse_json(const std::string& text) { return JsonParser(text).document(); }

}  // namespace explain
}  // namespace tessera
