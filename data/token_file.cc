#include "data/token_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "tensor/atomic_file.h"
#include "tensor/check.h"

namespace tessera {
namespace data {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "token files are little-endian and read and written as they are in memory");

constexpr int64_t kHeaderBytes = kTokenFileHeaderInts * sizeof(int32_t);

void write_token_file(const std::string& path, const std::vector<uint16_t>& tokens) {
  TS_CHECK(tokens.size() <= static_cast<size_t>(INT32_MAX), "write_token_file: '", path, "': ",
           tokens.size(), " tokens, more than the header's int32 count holds");
  int32_t header[kTokenFileHeaderInts] = {kTokenFileMagic, kTokenFileVersion,
                                          static_cast<int32_t>(tokens.size())};
  write_file_atomically(
      path,
      [&](std::ostream& out) {
        out.write(reinterpret_cast<const char*>(header), kHeaderBytes);
        out.write(reinterpret_cast<const char*>(tokens.data()),
                  static_cast<std::streamsize>(tokens.size() * sizeof(uint16_t)));
      },
      "write_token_file");
}

void write_token_file(const std::string& path, const std::vector<int32_t>& tokens) {
  std::vector<uint16_t> narrow(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    TS_CHECK(tokens[i] >= 0 && tokens[i] <= UINT16_MAX, "write_token_file: '", path, "': token ",
             i, " is ", tokens[i], ", outside the uint16 range [0, 65536) of version ",
             kTokenFileVersion);
    narrow[i] = static_cast<uint16_t>(tokens[i]);
  }
  write_token_file(path, narrow);
}

std::vector<uint16_t> read_token_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TS_CHECK(in, "read_token_file: cannot open '", path, "': ", std::strerror(errno));
  struct stat st {};
  TS_CHECK(stat(path.c_str(), &st) == 0, "read_token_file: cannot stat '", path, "': ",
           std::strerror(errno));
  const int64_t size = st.st_size;
  TS_CHECK(size >= kHeaderBytes, "read_token_file: '", path, "' is ", size,
           " bytes, shorter than the ", kHeaderBytes, "-byte header");
  int32_t header[kTokenFileHeaderInts];
  in.read(reinterpret_cast<char*>(header), kHeaderBytes);
  TS_CHECK(in, "read_token_file: cannot read the header of '", path, "'");
  TS_CHECK(header[0] == kTokenFileMagic, "read_token_file: '", path, "' has magic ", header[0],
           ", expected ", kTokenFileMagic, " (llm.c's token files)");
  TS_CHECK(header[1] == kTokenFileVersion, "read_token_file: '", path, "' has version ", header[1],
           ", expected ", kTokenFileVersion, " (uint16 tokens; version 2 is llm.c's uint32 "
           "tokens for Llama 3)");
  const int64_t count = header[2];
  TS_CHECK(count >= 0, "read_token_file: '", path, "' has a negative token count ", count);
  const int64_t expected = kHeaderBytes + count * static_cast<int64_t>(sizeof(uint16_t));
  TS_CHECK(size == expected, "read_token_file: '", path, "' is ", size, " bytes, but its header "
           "says ", count, " tokens: ", expected, " bytes (", size < expected ? "truncated" :
           "bytes after the tokens", ")");
  std::vector<uint16_t> tokens(count);
  in.read(reinterpret_cast<char*>(tokens.data()),
          static_cast<std::streamsize>(count * sizeof(uint16_t)));
  TS_CHECK(in, "read_token_file: cannot read the ", count, " tokens of '", path, "'");
  return tokens;
}

}  // namespace data
}  // namespace tessera
