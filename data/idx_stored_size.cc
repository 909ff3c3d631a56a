#include "data/idx_stored_size.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "tensor/check.h"

namespace tessera {
namespace data {

namespace {

// A gzip member is at least its 10-byte header and its 8-byte trailer (CRC32, ISIZE).
constexpr uint64_t kGzipHeaderAndTrailer = 18;

uint64_t size_on_disk(const std::string& path) {
  struct stat st;
  TS_CHECK(::stat(path.c_str(), &st) == 0, "read_idx: cannot stat '", path, "': ",
           std::strerror(errno));
  return static_cast<uint64_t>(st.st_size);
}

// The last 4 bytes of the file, little-endian.
uint32_t gzip_isize(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  TS_CHECK(f != nullptr, "read_idx: cannot open '", path, "': ", std::strerror(errno));
  unsigned char b[4] = {0, 0, 0, 0};
  const bool ok = std::fseek(f, -4, SEEK_END) == 0 && std::fread(b, 1, 4, f) == 4;
  std::fclose(f);
  TS_CHECK(ok, "read_idx: cannot read the gzip trailer at the end of '", path, "'");
  return uint32_t{b[0]} | (uint32_t{b[1]} << 8) | (uint32_t{b[2]} << 16) | (uint32_t{b[3]} << 24);
}

}  // namespace

void check_stored_size(const std::string& path, bool gzipped, const Shape& header_shape,
                       uint64_t expected_bytes) {
  const uint64_t on_disk = size_on_disk(path);
  if (!gzipped) {
    TS_CHECK(on_disk == expected_bytes, "read_idx: '", path, "' is ", on_disk,
             " bytes long, but its header says ", header_shape, ", a file of ", expected_bytes,
             " bytes: ", on_disk < expected_bytes ? "it is truncated" : "it has bytes after the data");
    return;
  }
  TS_CHECK(on_disk >= kGzipHeaderAndTrailer, "read_idx: '", path, "' is gzip'd but only ", on_disk,
           " bytes long, too short to hold a gzip header and trailer (", kGzipHeaderAndTrailer,
           " bytes): it is truncated");
  const uint32_t isize = gzip_isize(path);
  const uint32_t expected = static_cast<uint32_t>(expected_bytes);  // mod 2^32, as ISIZE
  TS_CHECK(isize == expected, "read_idx: '", path, "' has a gzip trailer whose ISIZE says it "
           "inflates to ", isize, " bytes (mod 2^32), but its header says ", header_shape,
           ", a file of ", expected_bytes, " bytes (", expected, " mod 2^32): it is truncated, "
           "damaged or holds other data (a file of several gzip members, whose last ISIZE counts "
           "only the last member, loads whole but not by its first rows: gzip it as one)");
}

}  // namespace data
}  // namespace tessera
