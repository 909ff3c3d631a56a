#include "data/idx.h"

#include "data/idx_stored_size.h"

#include <zlib.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <vector>

namespace tessera {
namespace data {

namespace {

// A gzip'd or plain file (gzread reads both), read only as far as asked: a gzip stream is
// inflated a chunk at a time, so a small file that inflates to gigabytes (a gzip bomb) costs no
// more memory than the header it starts with promises. Every read that comes back short or
// fails asks zlib for its verdict: a damaged deflate stream, a CRC32 or length in the trailer
// that does not match, or a stream cut short is an Error saying the file is corrupt, with
// zlib's reason.
class IdxFile {
 public:
  explicit IdxFile(const std::string& path) : path_(path), file_(gzopen(path.c_str(), "rb")) {
    TS_CHECK(file_ != nullptr, "read_idx: cannot open '", path, "': ", std::strerror(errno),
             " (Fashion-MNIST is installed by tools/setup.sh under "
             "/usr/share/datasets/fashion-mnist)");
  }
  ~IdxFile() {
    if (file_ != nullptr) gzclose(file_);
  }
  IdxFile(const IdxFile&) = delete;
  IdxFile& operator=(const IdxFile&) = delete;

  // Appends up to `n` bytes to `out`, fewer only at the end of the file.
  void read(uint64_t n, std::vector<unsigned char>& out) {
    while (n > 0) {
      const unsigned want = static_cast<unsigned>(std::min<uint64_t>(n, kChunk));
      const size_t old = out.size();
      out.resize(old + want);
      const unsigned got = read_some(out.data() + old, want);
      out.resize(old + got);
      if (got < want) return;
      n -= want;
    }
  }

  // Reads on, discarding what it reads, to the end of the file or for at most `limit` bytes;
  // returns how many it read (limit + 1 when the file goes on past the limit). Memory stays at
  // one chunk whatever the stream inflates to.
  uint64_t skip(uint64_t limit) {
    std::vector<unsigned char> scratch(kChunk);
    uint64_t total = 0;
    while (total <= limit) {
      const unsigned got = read_some(scratch.data(), kChunk);
      total += got;
      if (got < kChunk) break;
    }
    return std::min(total, limit + 1);
  }

  // A plain file, read as it is (no zlib stream to check).
  bool plain() { return gzdirect(file_) == 1; }

  // After the whole file was read. read_some has already reported a stream cut short; gzclose
  // is checked anyway.
  void close() {
    const int status = gzclose(file_);
    file_ = nullptr;
    TS_CHECK(status == Z_OK, "read_idx: '", path_, "' is corrupt or truncated (gzip status ",
             status, ")");
  }

 private:
  static constexpr unsigned kChunk = 1 << 20;

  // One gzread. It fails (-1) on a damaged stream or trailer; it comes back short at the end of
  // the file, and also, with Z_BUF_ERROR ("unexpected end of file") left in gzerror, when the
  // stream was cut short: both are reported here, as zlib words them.
  unsigned read_some(unsigned char* p, unsigned n) {
    const int got = gzread(file_, p, n);
    if (got < 0 || static_cast<unsigned>(got) < n) {
      int code = Z_OK;
      const char* message = gzerror(file_, &code);
      TS_CHECK(code == Z_OK, "read_idx: '", path_, "' is corrupt: ", zlib_reason(message));
    }
    return static_cast<unsigned>(got);
  }

  // gzerror prefixes its message with the path; the Error names the file itself.
  std::string zlib_reason(const char* message) const {
    const std::string m = message == nullptr ? "" : message;
    const std::string prefix = path_ + ": ";
    return m.compare(0, prefix.size(), prefix) == 0 ? m.substr(prefix.size()) : m;
  }

  std::string path_;
  gzFile file_;
};

// How far a gzip stream that goes on past its header is read to reach zlib's verdict (see
// read_idx): a damaged stream runs on by a few bytes to kilobytes, a gzip bomb by gigabytes.
constexpr uint64_t kReadOnLimit = uint64_t{64} << 20;

uint32_t big_endian_u32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

template <typename T>
T big_endian(const unsigned char* p) {
  unsigned char swapped[sizeof(T)];
  for (size_t i = 0; i < sizeof(T); ++i) swapped[i] = p[sizeof(T) - 1 - i];
  T value;
  std::memcpy(&value, swapped, sizeof(T));
  return value;
}

// The header: magic, element type, rank, dimensions, and the counts they imply.
struct Header {
  int type = 0;
  size_t element = 0;  // bytes per element in the file
  DType dtype = kU8;
  Shape shape;
  size_t bytes = 0;  // the header's own: 4 + 4 rank
  uint64_t count = 0, data_bytes = 0;
};

Header read_header(IdxFile& file, const std::string& path) {
  Header h;
  std::vector<unsigned char> bytes;
  file.read(4, bytes);
  TS_CHECK(bytes.size() >= 4, "read_idx: '", path, "' is ", bytes.size(),
           " bytes long, too short for an IDX header");
  TS_CHECK(bytes[0] == 0 && bytes[1] == 0, "read_idx: '", path,
           "' does not start with the IDX magic number (first bytes ", int(bytes[0]), " ",
           int(bytes[1]), ", expected 0 0)");
  h.type = bytes[2];
  const int rank = bytes[3];
  switch (h.type) {
    case 0x08: h.element = 1; h.dtype = kU8; break;
    case 0x09: h.element = 1; h.dtype = kI32; break;
    case 0x0B: h.element = 2; h.dtype = kI32; break;
    case 0x0C: h.element = 4; h.dtype = kI32; break;
    case 0x0D: h.element = 4; h.dtype = kF32; break;
    case 0x0E: h.element = 8; h.dtype = kF64; break;
    default:
      TS_FAIL("read_idx: '", path, "' has unknown element type 0x", std::hex, h.type);
  }
  TS_CHECK(rank >= 1, "read_idx: '", path, "' has rank 0");
  h.bytes = 4 + 4 * static_cast<size_t>(rank);
  file.read(h.bytes - 4, bytes);
  TS_CHECK(bytes.size() >= h.bytes, "read_idx: '", path, "' ends inside its header (", bytes.size(),
           " bytes, header needs ", h.bytes, ")");
  for (int d = 0; d < rank; ++d) h.shape.push_back(big_endian_u32(&bytes[4 + 4 * d]));
  // Up to 255 dimensions of 2^32: the element and byte counts are checked before they size
  // anything (a product that wrapped to a small number would pass the size checks). The
  // product of the dimensions taken as at least 1 bounds the count and the tensor's int64
  // strides (a zero dimension does not make [0, 2^32 - 1, 2^32 - 1] representable).
  uint64_t span = 1;
  bool overflow = false;
  h.count = 1;
  for (int64_t d : h.shape) {
    overflow = overflow || __builtin_mul_overflow(span, std::max<uint64_t>(d, 1), &span) ||
               span > static_cast<uint64_t>(INT64_MAX);
    h.count *= static_cast<uint64_t>(d);  // count <= span until overflow is set
  }
  overflow = overflow ||
             __builtin_mul_overflow(h.count, static_cast<uint64_t>(h.element), &h.data_bytes) ||
             h.data_bytes > UINT64_MAX - h.bytes;
  TS_CHECK(!overflow, "read_idx: '", path, "' has header shape ", h.shape, " of ", h.element,
           "-byte elements: the product of its dimensions or its byte count overflows 64 bits");
  return h;
}

}  // namespace

Shape read_idx_shape(const std::string& path) {
  IdxFile file(path);
  return read_header(file, path).shape;
}

Tensor read_idx(const std::string& path, int64_t rows) {
  IdxFile file(path);
  const Header h = read_header(file, path);
  const int type = h.type;
  const size_t element = h.element, header = h.bytes;
  Shape shape = h.shape;
  uint64_t count = h.count, data_bytes = h.data_bytes;
  // Only the first `rows`: the shape, count and byte count shrink to them (no overflow, they
  // only get smaller), and the file is read no further.
  const Shape header_shape = shape;
  const bool prefix = rows >= 0 && rows < shape[0];
  if (prefix) {
    const uint64_t row_elements = count / static_cast<uint64_t>(shape[0]);  // shape[0] > rows >= 0
    shape[0] = rows;
    count = row_elements * static_cast<uint64_t>(rows);
    data_bytes = count * element;
    // The end of the file, which this read does not reach, from its size on disk.
    check_stored_size(path, !file.plain(), header_shape, header + h.data_bytes);
  }
  // The data, and one byte more: a file (or an inflating gzip stream) that goes on past what
  // the header describes is stopped there, never held whole.
  std::vector<unsigned char> data;
  file.read(prefix ? data_bytes : data_bytes + 1, data);
  if (data.size() > data_bytes) {
    // zlib's verdict first. Damage in the middle of a deflate stream often decodes to a few
    // bytes more than the intact stream held (the Huffman decoder falls back into step a
    // little after the damage, having emitted extra symbols), and only the CRC32 at the end of
    // the stream tells that apart from a file that really holds more. So a gzip stream is read
    // on, into one scratch chunk, to its end (where a damaged one fails as corrupt), or for at
    // most kReadOnLimit bytes, which bounds the time a gzip bomb costs.
    std::string after = "reading stopped there";
    if (!file.plain()) {
      const uint64_t more = file.skip(kReadOnLimit);
      after = more > kReadOnLimit
                  ? detail::str("its gzip stream is intact for the ", kReadOnLimit >> 20,
                                " MiB past them that were read, where reading stopped")
                  : detail::str("its gzip stream is intact to its end, ", 1 + more,
                                " bytes past them");
    }
    TS_FAIL("read_idx: '", path, "' has unexpected bytes after the ", shape,
            " elements its header describes: it holds more than the ", header + data_bytes,
            " bytes the header accounts for (", header, " of header, ", data_bytes, " of data); ",
            after);
  }
  file.close();
  const std::string needed = prefix ? detail::str(", whose first ", rows, " rows need ", data_bytes,
                                                  " bytes of data,")
                                    : detail::str(" (", data_bytes, " bytes of data)");
  TS_CHECK(data.size() == data_bytes, "read_idx: '", path, "' is truncated: header says ",
           header_shape, needed, " but only ", data.size(), " bytes follow it");

  Tensor out = empty(shape, h.dtype);
  const unsigned char* p = data.data();
  switch (type) {
    case 0x08: std::memcpy(out.raw_data(), p, count); break;
    case 0x09: for (size_t i = 0; i < count; ++i) out.data<int32_t>()[i] = static_cast<int8_t>(p[i]); break;
    case 0x0B: for (size_t i = 0; i < count; ++i) out.data<int32_t>()[i] = big_endian<int16_t>(p + 2 * i); break;
    case 0x0C: for (size_t i = 0; i < count; ++i) out.data<int32_t>()[i] = big_endian<int32_t>(p + 4 * i); break;
    case 0x0D: for (size_t i = 0; i < count; ++i) out.data<float>()[i] = big_endian<float>(p + 4 * i); break;
    case 0x0E: for (size_t i = 0; i < count; ++i) out.data<double>()[i] = big_endian<double>(p + 8 * i); break;
  }
  return out;
}

}  // namespace data
}  // namespace tessera
