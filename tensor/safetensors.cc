#include "tensor/safetensors.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdint>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include <zlib.h>

#include "tensor/atomic_file.h"
#include "tensor/safetensors_json.h"

namespace tessera {

namespace {

// ---- Content hashes ----------------------------------------------------------------------------

constexpr const char* kHeaderCrcKey = "header_crc32";
constexpr const char* kTensorCrcPrefix = "crc32.";
// Where "header_crc32"'s value stands in a hashed header: right after this.
const std::string kHeaderCrcLead = std::string("{\"__metadata__\":{\"") + kHeaderCrcKey + "\":\"";

uint32_t crc32_of(uint32_t crc, const void* data, uint64_t bytes) {
  return static_cast<uint32_t>(::crc32_z(crc, static_cast<const Bytef*>(data), bytes));
}

std::string hex8(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%08x", v);
  return buf;
}

bool parse_hex8(const std::string& s, uint32_t* out) {
  if (s.size() != 8) return false;
  uint32_t v = 0;
  for (char c : s) {
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return false;
    v = v * 16 + static_cast<uint32_t>(d);
  }
  *out = v;
  return true;
}

bool is_hash_key(const std::string& key) {
  return key == kHeaderCrcKey || key.compare(0, std::strlen(kTensorCrcPrefix), kTensorCrcPrefix) == 0;
}

// The crc32 of the 8-byte length and the header text, with the header's own hash as "00000000".
uint32_t header_crc(std::string text) {
  text.replace(kHeaderCrcLead.size(), 8, "00000000");
  unsigned char len[8];
  for (int b = 0; b < 8; ++b) len[b] = static_cast<unsigned char>(uint64_t{text.size()} >> (8 * b));
  return crc32_of(crc32_of(0, len, 8), text.data(), text.size());
}

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

using safetensors_json::printable;

// Bytes of a tensor of this shape and dtype, or false when the product of the dimensions taken
// as at least 1 (which bounds the element count and the strides, int64 in Tensor; a zero
// dimension does not make [0, 2^40, 2^40] representable) leaves int64 or the byte count leaves
// 64 bits.
bool byte_count(const std::vector<uint64_t>& shape, DType dtype, uint64_t* bytes) {
  uint64_t n = 1, span = 1;
  for (uint64_t d : shape) {
    if (__builtin_mul_overflow(span, std::max<uint64_t>(d, 1), &span) ||
        span > static_cast<uint64_t>(INT64_MAX)) {
      return false;
    }
    n *= d;  // n <= span
  }
  return !__builtin_mul_overflow(n, static_cast<uint64_t>(element_size(dtype)), bytes);
}

}  // namespace

uint32_t save_safetensors(const std::string& path, const StateDict& tensors,
                          const Metadata& metadata, ContentHashes hashes,
                          const std::function<void()>& before_rename) {
  const bool hashed = hashes == ContentHashes::kWrite;
  std::vector<Tensor> data;
  Metadata meta = metadata;
  for (const auto& [key, value] : metadata) {
    TS_CHECK(!is_hash_key(key), "save_safetensors: metadata key '", key, "' is reserved for the "
             "content hashes ('", kHeaderCrcKey, "', '", kTensorCrcPrefix, "NAME')");
  }
  std::ostringstream entries;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    TS_CHECK(t.defined(), "save_safetensors: tensor '", name, "' is undefined");
    TS_CHECK(name != "__metadata__", "save_safetensors: '__metadata__' is reserved");
    const Tensor host = t.cpu().contiguous();
    entries << "," << safetensors_json::quoted(name, "tensor name") << ":{\"dtype\":\"" << safetensors_dtype(t.dtype())
            << "\",\"shape\":[";
    for (int64_t d = 0; d < t.dim(); ++d) entries << (d ? "," : "") << t.size(d);
    entries << "],\"data_offsets\":[" << offset << "," << offset + host.nbytes() << "]}";
    offset += host.nbytes();
    if (hashed) meta[kTensorCrcPrefix + name] = hex8(crc32_of(0, host.raw_data(), host.nbytes()));
    data.push_back(host);
  }
  // The header's own hash first (at a fixed place, kHeaderCrcLead), then the rest in key order.
  std::string text = hashed ? kHeaderCrcLead + "00000000\"" : "{\"__metadata__\":{";
  bool first = !hashed;
  for (const auto& [key, value] : meta) {
    text += (first ? "" : ",") + safetensors_json::quoted(key, "metadata key") + ":" +
            safetensors_json::quoted(value, "metadata value");
    first = false;
  }
  text += "}";
  std::string rest = entries.str();
  if (!hashed && meta.empty()) {
    text = "{";  // no metadata at all: the standard layout of other writers
    if (!rest.empty()) rest.erase(0, 1);  // no comma after "{"
  }
  text += rest + "}";
  text.append((8 - text.size() % 8) % 8, ' ');  // data starts 8-byte aligned
  uint32_t crc = 0;
  if (hashed) {
    crc = header_crc(text);
    text.replace(kHeaderCrcLead.size(), 8, hex8(crc));
  }

  write_file_atomically(path, [&](std::ostream& out) {
    const uint64_t n = text.size();
    unsigned char len[8];
    for (int b = 0; b < 8; ++b) len[b] = static_cast<unsigned char>(n >> (8 * b));
    out.write(reinterpret_cast<const char*>(len), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const Tensor& t : data) {
      out.write(static_cast<const char*>(t.raw_data()), static_cast<std::streamsize>(t.nbytes()));
    }
  }, "save_safetensors", before_rename);
  return crc;
}

namespace {

// The 8-byte length and the header of `path`, read from `in`; `data_size` the bytes after it.
std::string read_header_text(std::ifstream& in, const std::string& path, uint64_t file_size) {
  TS_CHECK(file_size >= 8, "load_safetensors: '", path, "' is ", file_size,
           " bytes, too short for the 8-byte header length");
  unsigned char len[8];
  in.read(reinterpret_cast<char*>(len), 8);
  uint64_t n = 0;
  for (int b = 7; b >= 0; --b) n = (n << 8) | len[b];
  TS_CHECK(n <= file_size - 8, "load_safetensors: '", path, "' declares a ", n,
           "-byte header but only ", file_size - 8, " bytes follow");
  std::string text(n, '\0');
  in.read(&text[0], static_cast<std::streamsize>(n));
  TS_CHECK(in.good(), "load_safetensors: reading the header of '", path, "' failed: ",
           std::strerror(errno));
  return text;
}

// Moves the hash keys out of the metadata into the header, and checks the header's own hash:
// a file is hashed when it has any hash key, and then it must have all of them (a flip that
// renamed "header_crc32" must not make the file pass as one without hashes).
// Returns the tensors' hashes by name, for assign_hashes once the entries are read.
std::map<std::string, uint32_t> take_hashes(const std::string& text, const std::string& path,
                                            SafetensorsHeader& header) {
  std::map<std::string, uint32_t> tensor_crcs;
  bool has_header_crc = false;
  for (auto it = header.metadata.begin(); it != header.metadata.end();) {
    if (!is_hash_key(it->first)) {
      ++it;
      continue;
    }
    uint32_t v = 0;
    TS_CHECK(parse_hex8(it->second, &v), "load_safetensors: '", path, "': '", printable(it->first),
             "' is '", printable(it->second), "', not 8 hex digits (a corrupt header?)");
    if (it->first == kHeaderCrcKey) {
      has_header_crc = true;
      header.header_crc32 = v;
    } else {
      tensor_crcs[it->first.substr(std::strlen(kTensorCrcPrefix))] = v;
    }
    it = header.metadata.erase(it);
  }
  if (!has_header_crc && tensor_crcs.empty()) return tensor_crcs;  // a file without hashes
  header.hashed = true;
  TS_CHECK(has_header_crc && text.compare(0, kHeaderCrcLead.size(), kHeaderCrcLead) == 0,
           "load_safetensors: '", path, "': the header has tensor hashes but its own hash is not "
           "where tessera writes it: the header is corrupt");
  const uint32_t computed = header_crc(text);
  TS_CHECK(computed == header.header_crc32, "load_safetensors: '", path,
           "': the header fails its crc32 check (stored ", hex8(header.header_crc32), ", computed ",
           hex8(computed), "): the file is corrupt (a flipped bit or a torn write)");
  return tensor_crcs;
}

void assign_hashes(std::map<std::string, uint32_t> tensor_crcs, const std::string& path,
                   SafetensorsHeader& header) {
  if (!header.hashed) return;
  for (SafetensorsHeader::Entry& e : header.entries) {
    const auto it = tensor_crcs.find(e.name);
    TS_CHECK(it != tensor_crcs.end(), "load_safetensors: '", path, "': tensor '", printable(e.name),
             "' has no hash in a hashed file");
    e.crc32 = it->second;
    tensor_crcs.erase(it);
  }
  TS_CHECK(tensor_crcs.empty(), "load_safetensors: '", path, "': a hash for tensor '",
           tensor_crcs.empty() ? "" : printable(tensor_crcs.begin()->first),
           "', which the file does not hold");
}

[[noreturn]] void fail_tensor_hash(const std::string& path, const SafetensorsHeader::Entry& e,
                                   uint32_t computed) {
  TS_FAIL("load_safetensors: '", path, "': tensor '", printable(e.name), "' (", e.dtype, " ",
          e.shape, ") fails its crc32 check (stored ", hex8(e.crc32), ", computed ", hex8(computed),
          "): the file is corrupt (a flipped bit or a torn write)");
}

// Parses and checks the header: every entry's dtype, shape and offsets, the entries tiling the
// data, in data order.
SafetensorsHeader parse_header(const std::string& text, const std::string& path,
                               uint64_t data_size) {
  std::vector<safetensors_json::HeaderEntry> entries;
  SafetensorsHeader header;
  header.data_start = 8 + text.size();
  header.data_size = data_size;
  safetensors_json::read_header(text, path, entries, header.metadata);
  std::map<std::string, uint32_t> tensor_crcs = take_hashes(text, path, header);

  std::sort(entries.begin(), entries.end(),
            [](const auto& a, const auto& b) { return a.offsets < b.offsets; });
  uint64_t expected_begin = 0;
  for (const safetensors_json::HeaderEntry& e : entries) {
    const std::string& key = e.name;
    const std::string name = printable(key);
    DType dtype;
    TS_CHECK(parse_dtype(e.dtype, &dtype), "load_safetensors: '", path, "': entry '", name,
             "' has unknown dtype '", printable(e.dtype),
             "' (tessera reads F32, F64, F16, BF16, I64, I32, U8 and BOOL)");
    uint64_t need = 0;
    TS_CHECK(byte_count(e.shape, dtype, &need), "load_safetensors: '", path, "': entry '", name,
             "' has shape ", e.shape, " of ", e.dtype,
             " elements: the product of its dimensions or its byte count overflows 64 bits");
    TS_CHECK(e.offsets.size() == 2 && e.offsets[0] <= e.offsets[1], "load_safetensors: '", path,
             "': entry '", name, "' has data_offsets ", e.offsets,
             ", expected [begin, end] with begin <= end");
    const uint64_t begin = e.offsets[0], end = e.offsets[1];
    TS_CHECK(end - begin == need, "load_safetensors: '", path, "': entry '", name, "' (",
             e.dtype, " ", e.shape, ") needs ", need, " bytes but its offsets span ", end - begin);
    TS_CHECK(begin == expected_begin, "load_safetensors: '", path, "': entry '", name,
             "' starts at ", begin, ", expected ", expected_begin,
             " (entries must tile the data without gaps or overlap)");
    TS_CHECK(end <= data_size, "load_safetensors: '", path, "': entry '", name, "' ends at ", end,
             " but the file has only ", data_size, " bytes of data (truncated?)");
    // Checked above: every dimension fits in int64.
    header.entries.push_back({key, dtype, Shape(e.shape.begin(), e.shape.end()), begin, end});
    expected_begin = end;
  }
  TS_CHECK(expected_begin == data_size, "load_safetensors: '", path, "' has ",
           data_size - expected_begin, " bytes of data after its last tensor");
  assign_hashes(std::move(tensor_crcs), path, header);
  return header;
}

// Opens `path` into `in` and reads and checks its header; `in` is left at the data.
SafetensorsHeader open_with_header(const std::string& path, std::ifstream& in) {
  in.open(path, std::ios::binary);
  TS_CHECK(in.good(), "load_safetensors: cannot open '", path, "': ", std::strerror(errno));
  in.seekg(0, std::ios::end);
  const uint64_t size = static_cast<uint64_t>(in.tellg());
  in.seekg(0, std::ios::beg);
  const std::string text = read_header_text(in, path, size);
  return parse_header(text, path, size - 8 - text.size());
}

}  // namespace

const SafetensorsHeader::Entry* SafetensorsHeader::find(const std::string& name) const {
  for (const Entry& e : entries) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

SafetensorsHeader read_safetensors_header(const std::string& path) {
  std::ifstream in;
  return open_with_header(path, in);
}

Tensor read_safetensors_elements(const std::string& path, const SafetensorsHeader& header,
                                 const std::string& name, int64_t first, int64_t count) {
  const SafetensorsHeader::Entry* e = header.find(name);
  TS_CHECK(e != nullptr, "read_safetensors_elements: '", path, "' has no tensor '", name, "'");
  const int64_t numel = static_cast<int64_t>((e->end - e->begin) / element_size(e->dtype));
  TS_CHECK(first >= 0 && count >= 0 && first + count <= numel, "read_safetensors_elements: '",
           path, "': elements [", first, ", ", first + count, ") of '", name, "' (", e->shape,
           ", ", numel, " elements) are out of range");
  Tensor t = empty({count}, e->dtype);
  if (count == 0) return t;
  std::ifstream in(path, std::ios::binary);
  TS_CHECK(in.good(), "read_safetensors_elements: cannot open '", path, "': ",
           std::strerror(errno));
  const uint64_t bytes = static_cast<uint64_t>(count) * element_size(e->dtype);
  in.seekg(static_cast<std::streamoff>(header.data_start + e->begin +
                                       static_cast<uint64_t>(first) * element_size(e->dtype)));
  in.read(static_cast<char*>(t.raw_data()), static_cast<std::streamsize>(bytes));
  TS_CHECK(in.good(), "read_safetensors_elements: '", path, "': reading ", bytes, " bytes of '",
           name, "' failed (the file changed since its header was read?)");
  return t;
}

void verify_safetensors_tensor(const std::string& path, const SafetensorsHeader& header,
                               const std::string& name) {
  const SafetensorsHeader::Entry* e = header.find(name);
  TS_CHECK(e != nullptr, "verify_safetensors_tensor: '", path, "' has no tensor '", name, "'");
  if (!header.hashed) return;
  std::ifstream in(path, std::ios::binary);
  TS_CHECK(in.good(), "load_safetensors: cannot open '", path, "': ", std::strerror(errno));
  in.seekg(static_cast<std::streamoff>(header.data_start + e->begin));
  std::vector<char> piece(std::min<uint64_t>(e->end - e->begin, uint64_t{1} << 22));
  uint32_t crc = crc32_of(0, nullptr, 0);
  for (uint64_t left = e->end - e->begin; left > 0;) {
    const uint64_t n = std::min<uint64_t>(left, piece.size());
    in.read(piece.data(), static_cast<std::streamsize>(n));
    TS_CHECK(in.good(), "load_safetensors: '", path, "': reading tensor '", name,
             "' failed (the file changed since its header was read?)");
    crc = crc32_of(crc, piece.data(), n);
    left -= n;
  }
  if (crc != e->crc32) fail_tensor_hash(path, *e, crc);
}

SafetensorsHeader verify_safetensors(const std::string& path) {
  SafetensorsHeader header = read_safetensors_header(path);
  for (const SafetensorsHeader::Entry& e : header.entries) verify_safetensors_tensor(path, header, e.name);
  return header;
}

SafetensorsFile load_safetensors(const std::string& path) {
  std::ifstream in;
  SafetensorsHeader header = open_with_header(path, in);
  std::vector<char> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  TS_CHECK(data.size() == header.data_size, "load_safetensors: '", path,
           "' changed while it was read");
  SafetensorsFile file;
  for (const SafetensorsHeader::Entry& e : header.entries) {
    if (header.hashed) {
      const uint32_t crc = crc32_of(0, data.data() + e.begin, e.end - e.begin);
      if (crc != e.crc32) fail_tensor_hash(path, e, crc);
    }
    Tensor t = empty(e.shape, e.dtype);
    if (e.end > e.begin) std::memcpy(t.raw_data(), data.data() + e.begin, e.end - e.begin);
    file.tensors.set(e.name, t);
  }
  file.metadata = std::move(header.metadata);
  file.hashed = header.hashed;
  file.header_crc32 = header.header_crc32;
  return file;
}

}  // namespace tessera
