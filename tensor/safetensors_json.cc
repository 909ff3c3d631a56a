#include "tensor/safetensors_json.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>

#include "tensor/check.h"

namespace tessera {
namespace safetensors_json {

namespace {

using nlohmann::json;

const char* const kMetadataKey = "__metadata__";

[[noreturn]] void fail(const std::string& path, const std::string& entry, const std::string& what) {
  TS_FAIL("load_safetensors: '", path, "': bad header",
          entry.empty() ? std::string() : " in entry '" + printable(entry) + "'", ": ", what);
}

// A value as a message shows it: strings quoted and cut, numbers as JSON writes them.
std::string shown(const json& v) {
  if (v.is_string()) return "'" + printable(v.get<std::string>()) + "'";
  if (v.is_structured()) return v.is_array() ? "an array" : "an object";
  return v.dump();
}

std::vector<uint64_t> integers(const json& v, const std::string& field, const std::string& path,
                               const std::string& entry) {
  if (!v.is_array()) fail(path, entry, "field '" + field + "' is " + shown(v) + ", expected an array");
  std::vector<uint64_t> out;
  for (const json& n : v) {
    if (!n.is_number_unsigned()) {
      fail(path, entry, "field '" + field + "' holds " + shown(n) +
                            ", expected a non-negative integer of at most 64 bits");
    }
    out.push_back(n.get<uint64_t>());
  }
  return out;
}

HeaderEntry entry(const std::string& name, const json& v, const std::string& path) {
  if (!v.is_object()) fail(path, name, "the entry is " + shown(v) + ", expected an object");
  HeaderEntry e;
  e.name = name;
  for (const auto& [field, value] : v.items()) {
    if (field == "dtype") {
      if (!value.is_string()) fail(path, name, "field 'dtype' is " + shown(value) + ", expected a string");
      e.dtype = value.get<std::string>();
    } else if (field == "shape") {
      e.shape = integers(value, field, path, name);
    } else if (field == "data_offsets") {
      e.offsets = integers(value, field, path, name);
    } else {
      fail(path, name, "unknown field '" + printable(field) + "'");
    }
  }
  if (!v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets")) {
    fail(path, name, "the entry lacks dtype, shape or data_offsets");
  }
  return e;
}

// nlohmann-json's message without its "[json.exception.parse_error.101] parse error at line 1,
// column 4: " lead (the byte is said after it), and the text it quotes made printable.
std::string syntax(const json::parse_error& e) {
  const std::string what = e.what();
  const size_t column = what.find("column ");
  const size_t colon = column == std::string::npos ? std::string::npos : what.find(": ", column);
  return printable(colon == std::string::npos ? what : what.substr(colon + 2), 400);
}

}  // namespace

std::string printable(const std::string& s, size_t limit) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < limit; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c >= 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return s.size() > limit ? out + "..." : out;
}

std::string quoted(const std::string& s, const std::string& what) {
  try {
    return json(s).dump();
  } catch (const json::type_error&) {
    TS_FAIL("save_safetensors: ", what, " '", printable(s),
            "' is not UTF-8 text, which a JSON header cannot hold");
  }
}

void read_header(const std::string& text, const std::string& path, std::vector<HeaderEntry>& entries,
                 Metadata& metadata) {
  // The keys read so far in each open object, innermost last, and the entry being read (the
  // top object's last key), for messages.
  std::vector<std::set<std::string>> keys;
  std::string current;
  const json::parser_callback_t callback = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) {
      keys.emplace_back();
    } else if (event == json::parse_event_t::object_end) {
      keys.pop_back();
    } else if (event == json::parse_event_t::key) {
      const std::string key = parsed.get<std::string>();
      if (depth == 1) current = key;
      if (!keys.back().insert(key).second) {
        if (depth == 1) {
          fail(path, "", key == kMetadataKey ? "'__metadata__' appears twice"
                                             : "entry '" + printable(key) + "' appears twice");
        }
        fail(path, current == kMetadataKey ? "" : current,
             current == kMetadataKey ? "metadata key '" + printable(key) + "' appears twice"
                                     : "field '" + printable(key) + "' appears twice");
      }
    }
    return true;
  };
  json header;
  try {
    header = json::parse(text, callback);
  } catch (const json::parse_error& e) {
    fail(path, current == kMetadataKey ? "" : current,
         syntax(e) + " at byte " + std::to_string(e.byte) + " of the header");
  } catch (const json::exception& e) {  // a number too large for a double: "1e999"
    fail(path, current == kMetadataKey ? "" : current, printable(e.what(), 400));
  }
  if (!header.is_object()) fail(path, "", "the header is " + shown(header) + ", expected an object");
  for (const auto& [key, value] : header.items()) {
    if (key != kMetadataKey) {
      entries.push_back(entry(key, value, path));
      continue;
    }
    if (!value.is_object()) fail(path, "", "'__metadata__' is " + shown(value) + ", expected an object");
    for (const auto& [k, v] : value.items()) {
      if (!v.is_string()) {
        fail(path, "", "metadata key '" + printable(k) + "' holds " + shown(v) + ", expected a string");
      }
      metadata.emplace(k, v.get<std::string>());
    }
  }
}

}  // namespace safetensors_json
}  // namespace tessera
