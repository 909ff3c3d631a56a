// llm.c's token files: the exact bytes of a small file, the round trip, and the refusals of a
// wrong magic, a wrong version, a truncated file, bytes after the tokens and ids past uint16.
#include "data/token_file.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>

#include "tests/util/expect_error.h"
#include "tests/util/test_util.h"

namespace tessera {
namespace data {
namespace {

using tessera::testing::expect_error;
using tessera::testing::temp_path;

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

int32_t int_at(const std::string& bytes, size_t i) {
  int32_t v;
  std::memcpy(&v, bytes.data() + 4 * i, 4);
  return v;
}

TEST(TokenFile, LayoutIsLlmCs) {
  const std::string path = temp_path("layout.bin");
  write_token_file(path, std::vector<int32_t>{15496, 995, 0, 50256, 65535});
  const std::string bytes = read_bytes(path);
  ASSERT_EQ(bytes.size(), 1024u + 2 * 5);
  EXPECT_EQ(int_at(bytes, 0), 20240520);
  EXPECT_EQ(int_at(bytes, 1), 1);
  EXPECT_EQ(int_at(bytes, 2), 5);
  for (size_t i = 3; i < 256; ++i) EXPECT_EQ(int_at(bytes, i), 0) << i;
  // 15496 = 0x3C88, little-endian: 88 3C.
  EXPECT_EQ(static_cast<unsigned char>(bytes[1024]), 0x88);
  EXPECT_EQ(static_cast<unsigned char>(bytes[1025]), 0x3C);
  EXPECT_EQ(read_token_file(path), (std::vector<uint16_t>{15496, 995, 0, 50256, 65535}));
}

TEST(TokenFile, EmptyStreamRoundTrips) {
  const std::string path = temp_path("empty.bin");
  write_token_file(path, std::vector<uint16_t>{});
  EXPECT_EQ(read_bytes(path).size(), 1024u);
  EXPECT_TRUE(read_token_file(path).empty());
}

TEST(TokenFile, RefusesWhatIsNotAWholeVersion1File) {
  const std::string good = temp_path("good.bin");
  write_token_file(good, std::vector<uint16_t>{1, 2, 3});
  const std::string bytes = read_bytes(good);
  const std::string path = temp_path("bad.bin");

  std::string magic = bytes;
  magic[0] = 0x01;
  write_bytes(path, magic);
  expect_error([&] { read_token_file(path); }, "bad.bin' has magic");
  expect_error([&] { read_token_file(path); }, "expected 20240520");

  std::string version = bytes;
  version[4] = 2;
  write_bytes(path, version);
  expect_error([&] { read_token_file(path); }, "has version 2, expected 1");

  write_bytes(path, bytes.substr(0, bytes.size() - 1));
  expect_error([&] { read_token_file(path); },
               "is 1029 bytes, but its header says 3 tokens: 1030 bytes (truncated)");
  write_bytes(path, bytes + "xy");
  expect_error([&] { read_token_file(path); }, "1032 bytes, but its header says 3 tokens");
  write_bytes(path, bytes.substr(0, 100));
  expect_error([&] { read_token_file(path); }, "is 100 bytes, shorter than the 1024-byte header");
  expect_error([&] { read_token_file(temp_path("absent.bin")); }, "cannot open");
}

TEST(TokenFile, RefusesIdsPastUint16) {
  expect_error([&] { write_token_file(temp_path("wide.bin"), std::vector<int32_t>{1, 65536}); },
               "token 1 is 65536, outside the uint16 range");
  expect_error([&] { write_token_file(temp_path("neg.bin"), std::vector<int32_t>{-1}); },
               "token 0 is -1");
}

}  // namespace
}  // namespace data
}  // namespace tessera
