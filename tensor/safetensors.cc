#include "tensor/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

namespace tessera {

namespace {

const char* safetensors_dtype(DType d) {
  switch (d) {
    case kF32: return "F32";
    case kF64: return "F64";
    case kF16: return "F16";
    case kBF16: return "BF16";
    case kI64: return "I64";
    case kI32: return "I32";
    case kU8: return "U8";
    case kBool: return "BOOL";
  }
  return "?";
}

bool parse_dtype(const std::string& s, DType* out) {
  for (DType d : {kF32, kF64, kF16, kBF16, kI64, kI32, kU8, kBool}) {
    if (s == safetensors_dtype(d)) {
      *out = d;
      return true;
    }
  }
  return false;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
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

// A JSON reader for the header's subset: objects, arrays, strings, non-negative integers.
class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& path) : s_(text), path_(path) {}

  struct Entry {
    std::string dtype;
    std::vector<int64_t> shape, offsets;
  };

  void parse(std::vector<std::pair<std::string, Entry>>& entries, Metadata& metadata) {
    expect('{');
    if (peek() == '}') {
      ++i_;
      return;
    }
    while (true) {
      const std::string key = string();
      expect(':');
      if (key == "__metadata__") {
        expect('{');
        if (peek() != '}') {
          while (true) {
            const std::string k = string();
            expect(':');
            metadata[k] = string();
            if (peek() != ',') break;
            ++i_;
          }
        }
        expect('}');
      } else {
        entries.emplace_back(key, entry(key));
      }
      if (peek() != ',') break;
      ++i_;
    }
    expect('}');
    skip_space();
    check(i_ == s_.size(), "trailing characters after the header object");
  }

 private:
  Entry entry(const std::string& name) {
    Entry e;
    bool dtype = false, shape = false, offsets = false;
    expect('{');
    while (true) {
      const std::string key = string();
      expect(':');
      if (key == "dtype") {
        e.dtype = string();
        dtype = true;
      } else if (key == "shape") {
        e.shape = integers();
        shape = true;
      } else if (key == "data_offsets") {
        e.offsets = integers();
        offsets = true;
      } else {
        fail("unknown field '" + key + "' in entry '" + name + "'");
      }
      if (peek() != ',') break;
      ++i_;
    }
    expect('}');
    check(dtype && shape && offsets, "entry '" + name + "' lacks dtype, shape or data_offsets");
    return e;
  }

  std::vector<int64_t> integers() {
    std::vector<int64_t> out;
    expect('[');
    if (peek() == ']') {
      ++i_;
      return out;
    }
    while (true) {
      skip_space();
      check(i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_])),
            "expected a non-negative integer at byte " + std::to_string(i_));
      int64_t v = 0;
      while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) {
        check(v < (int64_t{1} << 58), "integer too large at byte " + std::to_string(i_));
        v = v * 10 + (s_[i_++] - '0');
      }
      out.push_back(v);
      if (peek() != ',') break;
      ++i_;
    }
    expect(']');
    return out;
  }

  std::string string() {
    expect('"');
    std::string out;
    while (true) {
      check(i_ < s_.size(), "unterminated string");
      const char c = s_[i_++];
      if (c == '"') break;
      if (c == '\\') {
        check(i_ < s_.size(), "unterminated escape");
        const char e = s_[i_++];
        if (e == 'u') {
          check(i_ + 4 <= s_.size(), "short \\u escape");
          out += static_cast<char>(std::stoi(s_.substr(i_, 4), nullptr, 16));
          i_ += 4;
        } else {
          out += e == 'n' ? '\n' : e == 't' ? '\t' : e;
        }
      } else {
        out += c;
      }
    }
    return out;
  }

  char peek() {
    skip_space();
    return i_ < s_.size() ? s_[i_] : '\0';
  }
  void expect(char c) {
    check(peek() == c, std::string("expected '") + c + "' at byte " + std::to_string(i_));
    ++i_;
  }
  void skip_space() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  void check(bool ok, const std::string& what) {
    if (!ok) fail(what);
  }
  [[noreturn]] void fail(const std::string& what) {
    TS_FAIL("load_safetensors: '", path_, "': bad header: ", what);
  }

  const std::string& s_;
  const std::string& path_;
  size_t i_ = 0;
};

}  // namespace

void save_safetensors(const std::string& path, const StateDict& tensors, const Metadata& metadata) {
  std::vector<Tensor> data;
  std::ostringstream header;
  header << "{";
  bool first = true;
  if (!metadata.empty()) {
    header << "\"__metadata__\":{";
    for (auto it = metadata.begin(); it != metadata.end(); ++it) {
      if (it != metadata.begin()) header << ",";
      header << json_string(it->first) << ":" << json_string(it->second);
    }
    header << "}";
    first = false;
  }
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    TS_CHECK(t.defined(), "save_safetensors: tensor '", name, "' is undefined");
    TS_CHECK(name != "__metadata__", "save_safetensors: '__metadata__' is reserved");
    const Tensor host = t.cpu().contiguous();
    header << (first ? "" : ",") << json_string(name) << ":{\"dtype\":\""
           << safetensors_dtype(t.dtype()) << "\",\"shape\":[";
    for (int64_t d = 0; d < t.dim(); ++d) header << (d ? "," : "") << t.size(d);
    header << "],\"data_offsets\":[" << offset << "," << offset + host.nbytes() << "]}";
    offset += host.nbytes();
    data.push_back(host);
    first = false;
  }
  header << "}";
  std::string text = header.str();
  text.append((8 - text.size() % 8) % 8, ' ');  // data starts 8-byte aligned

  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    TS_CHECK(out.good(), "save_safetensors: cannot write '", tmp, "': ", std::strerror(errno));
    const uint64_t n = text.size();
    unsigned char len[8];
    for (int b = 0; b < 8; ++b) len[b] = static_cast<unsigned char>(n >> (8 * b));
    out.write(reinterpret_cast<const char*>(len), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const Tensor& t : data) {
      out.write(static_cast<const char*>(t.raw_data()), static_cast<std::streamsize>(t.nbytes()));
    }
    out.flush();
    TS_CHECK(out.good(), "save_safetensors: writing '", tmp, "' failed: ", std::strerror(errno));
  }
  // Flush to disk before the rename makes the new file visible under `path`.
  const int fd = ::open(tmp.c_str(), O_RDONLY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
  TS_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "save_safetensors: cannot rename '", tmp,
           "' to '", path, "': ", std::strerror(errno));
}

SafetensorsFile load_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TS_CHECK(in.good(), "load_safetensors: cannot open '", path, "': ", std::strerror(errno));
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  TS_CHECK(bytes.size() >= 8, "load_safetensors: '", path, "' is ", bytes.size(),
           " bytes, too short for the 8-byte header length");
  uint64_t n = 0;
  for (int b = 7; b >= 0; --b) n = (n << 8) | static_cast<unsigned char>(bytes[b]);
  TS_CHECK(n <= bytes.size() - 8, "load_safetensors: '", path, "' declares a ", n,
           "-byte header but only ", bytes.size() - 8, " bytes follow");
  const std::string text(bytes.data() + 8, n);
  const char* data = bytes.data() + 8 + n;
  const uint64_t data_size = bytes.size() - 8 - n;

  std::vector<std::pair<std::string, HeaderParser::Entry>> entries;
  SafetensorsFile file;
  HeaderParser(text, path).parse(entries, file.metadata);

  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    return a.second.offsets < b.second.offsets;
  });
  uint64_t expected_begin = 0;
  for (const auto& [name, e] : entries) {
    DType dtype;
    TS_CHECK(parse_dtype(e.dtype, &dtype), "load_safetensors: '", path, "': entry '", name,
             "' has unknown dtype '", e.dtype, "'");
    TS_CHECK(e.offsets.size() == 2 && e.offsets[0] <= e.offsets[1], "load_safetensors: '", path,
             "': entry '", name, "' has data_offsets ", e.offsets, ", expected [begin, end]");
    const uint64_t begin = e.offsets[0], end = e.offsets[1];
    const uint64_t need = static_cast<uint64_t>(numel(e.shape)) * element_size(dtype);
    TS_CHECK(end - begin == need, "load_safetensors: '", path, "': entry '", name, "' (",
             e.dtype, " ", e.shape, ") needs ", need, " bytes but its offsets span ", end - begin);
    TS_CHECK(begin == expected_begin, "load_safetensors: '", path, "': entry '", name,
             "' starts at ", begin, ", expected ", expected_begin,
             " (entries must tile the data without gaps or overlap)");
    TS_CHECK(end <= data_size, "load_safetensors: '", path, "': entry '", name, "' ends at ", end,
             " but the file has only ", data_size, " bytes of data (truncated?)");
    Tensor t = empty(e.shape, dtype);
    if (need > 0) std::memcpy(t.raw_data(), data + begin, need);
    file.tensors.set(name, t);
    expected_begin = end;
  }
  TS_CHECK(expected_begin == data_size, "load_safetensors: '", path, "' has ",
           data_size - expected_begin, " bytes of data after its last tensor");
  return file;
}

}  // namespace tessera
