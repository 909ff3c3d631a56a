// safetensors: round trip of every dtype, the byte layout other tools expect, and rejection of
// truncated or corrupted files.
#include "tensor/safetensors.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <iterator>

#include "tensor/ops.h"
#include "tests/util/test_util.h"

namespace tessera {
namespace {

using tessera::testing::temp_path;

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), bytes.size());
}

StateDict sample() {
  StateDict s;
  s.set("w", randn({3, 4}));
  s.set("d", randn({2}, kF64));
  s.set("h", randn({5}).to(kF16));
  s.set("b", randn({2, 2}).to(kBF16));
  s.set("step", scalar_tensor(7, kI64));
  s.set("i", from_vector<int32_t>({1, -2}, {2}));
  s.set("u", from_vector<uint8_t>({255, 0, 3}, {3}));
  s.set("flag", gt(randn({4}), 0.0));
  s.set("empty", zeros({0, 3}));
  return s;
}

TEST(Safetensors, RoundTripsEveryDtypeAndMetadata) {
  const StateDict s = sample();
  save_safetensors(temp_path("a.safetensors"), s, {{"epoch", "3"}, {"note", "quote \" ok"}});
  const SafetensorsFile f = load_safetensors(temp_path("a.safetensors"));
  EXPECT_EQ(f.metadata.at("epoch"), "3");
  EXPECT_EQ(f.metadata.at("note"), "quote \" ok");
  ASSERT_EQ(f.tensors.size(), s.size());
  for (const auto& [name, t] : s) {
    const Tensor& got = f.tensors.at(name);
    EXPECT_EQ(got.dtype(), t.dtype()) << name;
    EXPECT_EQ(got.shape(), t.shape()) << name;
    if (t.numel() > 0) {
      EXPECT_EQ(std::string(static_cast<const char*>(got.raw_data()), got.nbytes()),
                std::string(static_cast<const char*>(t.contiguous().raw_data()), t.nbytes()))
          << name;
    }
  }
  // Non-contiguous tensors are written as their logical contents.
  StateDict v;
  v.set("t", arange(0, 6, 1, kF32).view({2, 3}).t());
  save_safetensors(temp_path("v.safetensors"), v);
  EXPECT_EQ(load_safetensors(temp_path("v.safetensors")).tensors.at("t").to_vector<float>(),
            (std::vector<float>{0, 3, 1, 4, 2, 5}));
}

TEST(Safetensors, ByteLayoutIsTheStandardOne) {
  StateDict s;
  s.set("x", from_vector<float>({1.5f}, {1}));
  save_safetensors(temp_path("l.safetensors"), s);
  const std::string bytes = read_bytes(temp_path("l.safetensors"));
  uint64_t n = 0;
  for (int b = 7; b >= 0; --b) n = (n << 8) | static_cast<unsigned char>(bytes[b]);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + n + 4);
  const std::string header = bytes.substr(8, n);
  EXPECT_EQ(header.rfind("{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 0), 0u)
      << header;
  float value;
  std::memcpy(&value, bytes.data() + 8 + n, 4);
  EXPECT_EQ(value, 1.5f);
  // No temporary file is left behind.
  EXPECT_FALSE(std::ifstream(temp_path("l.safetensors.tmp." + std::to_string(::getpid()))).good());
}

std::string error_loading(const std::string& bytes) {
  write_bytes(temp_path("bad.safetensors"), bytes);
  try {
    load_safetensors(temp_path("bad.safetensors"));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string header_file(const std::string& header, size_t data_bytes) {
  std::string out(8, '\0');
  for (int b = 0; b < 8; ++b) out[b] = static_cast<char>((header.size() >> (8 * b)) & 0xFF);
  return out + header + std::string(data_bytes, '\0');
}

TEST(Safetensors, CorruptOrTruncatedFilesAreRejected) {
  save_safetensors(temp_path("good.safetensors"), sample());
  const std::string good = read_bytes(temp_path("good.safetensors"));
  EXPECT_NE(error_loading(good.substr(0, 5)).find("too short"), std::string::npos);
  EXPECT_NE(error_loading(good.substr(0, good.size() - 3)).find("truncated"), std::string::npos);
  std::string huge = good;
  huge[6] = 0x7F;  // header length far beyond the file
  EXPECT_NE(error_loading(huge).find("header"), std::string::npos);
  EXPECT_NE(error_loading(header_file("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4))
                .find("needs 8 bytes"),
            std::string::npos);
  EXPECT_NE(error_loading(header_file("{\"x\":{\"dtype\":\"Q8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1))
                .find("unknown dtype"),
            std::string::npos);
  EXPECT_NE(error_loading(header_file("{\"x\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}", 2))
                .find("gaps or overlap"),
            std::string::npos);
  EXPECT_NE(error_loading(header_file("{\"x\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 3))
                .find("after its last tensor"),
            std::string::npos);
  EXPECT_NE(error_loading(header_file("{\"x\":", 0)).find("bad header"), std::string::npos);
  EXPECT_THROW(load_safetensors(temp_path("missing.safetensors")), Error);
}

}  // namespace
}  // namespace tessera
