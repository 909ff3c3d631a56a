// safetensors: round trip of every dtype, the byte layout other tools expect, and rejection of
// truncated or corrupted files: malformed JSON (escapes, numbers), impossible shapes, duplicate
// names. Every error names the file, and the entry when there is one. Writes are atomic and
// leave no temporary files behind.
#include "tensor/safetensors.h"

#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>

#include "tensor/ops.h"
#include "tests/util/expect_error.h"
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

// The header alone, and a range of one tensor's elements read without the rest (the sharded
// checkpoints' reader).
TEST(Safetensors, HeaderAndElementRangesReadOnlyWhatIsAsked) {
  const StateDict s = sample();
  const std::string path = temp_path("r.safetensors");
  save_safetensors(path, s, {{"id", "42"}});
  const SafetensorsHeader h = read_safetensors_header(path);
  EXPECT_EQ(h.metadata.at("id"), "42");
  ASSERT_EQ(h.entries.size(), s.size());
  const SafetensorsHeader::Entry* w = h.find("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->dtype, kF32);
  EXPECT_EQ(w->shape, (Shape{3, 4}));
  EXPECT_EQ(h.find("absent"), nullptr);
  // Elements 5..8 of the row-major [3, 4] tensor.
  const Tensor part = read_safetensors_elements(path, h, "w", 5, 4);
  EXPECT_EQ(part.to_vector<float>(), s.at("w").reshape({-1}).narrow(0, 5, 4).to_vector<float>());
  EXPECT_EQ(read_safetensors_elements(path, h, "d", 0, 2).to_vector<double>(),
            s.at("d").to_vector<double>());
  EXPECT_EQ(read_safetensors_elements(path, h, "w", 12, 0).numel(), 0);
  testing::expect_error([&] { read_safetensors_elements(path, h, "w", 10, 3); },
                        "elements [10, 13) of 'w' ([3, 4], 12 elements) are out of range");
  testing::expect_error([&] { read_safetensors_elements(path, h, "nope", 0, 1); },
                        "has no tensor 'nope'");
  // The header reader checks what load_safetensors checks: a truncated file is named.
  const std::string bytes = read_bytes(path);
  write_bytes(temp_path("cut.safetensors"), bytes.substr(0, bytes.size() - 3));
  testing::expect_error([&] { read_safetensors_header(temp_path("cut.safetensors")); },
                        "(truncated?)");
}

// Writes are atomic: a failed publish removes its temporary file and leaves the old file, and
// the temporary file of a writer that was killed is removed by the next write.
TEST(Safetensors, TemporaryFilesNeverOutliveTheirWriter) {
  StateDict s;
  s.set("t", ones({3}));
  const std::string dir = temp_path("atomic");
  std::remove((dir + "/x.safetensors").c_str());
  ASSERT_EQ(std::system(("mkdir -p " + dir + "/taken.safetensors").c_str()), 0);
  // The path is a directory: the rename fails, and the error says the temporary file is gone.
  tessera::testing::expect_error([&] { save_safetensors(dir + "/taken.safetensors", s); },
                                 "(removed the temporary file)");
  const std::string own_tmp = dir + "/taken.safetensors.tmp." + std::to_string(::getpid());
  EXPECT_FALSE(std::ifstream(own_tmp).good());
  // A killed writer's leftover (a pid that is not running) and a live one's (pid 1).
  const long dead = 4194303;  // above Linux's default pid_max of 4194304 - 1 in use is unlikely
  if (::kill(static_cast<pid_t>(dead), 0) == 0) GTEST_SKIP() << "pid " << dead << " is running";
  write_bytes(dir + "/x.safetensors.tmp." + std::to_string(dead), "half a file");
  write_bytes(dir + "/x.safetensors.tmp.1", "a live writer's");
  save_safetensors(dir + "/x.safetensors", s);
  EXPECT_FALSE(std::ifstream(dir + "/x.safetensors.tmp." + std::to_string(dead)).good());
  EXPECT_TRUE(std::ifstream(dir + "/x.safetensors.tmp.1").good());
  EXPECT_EQ(load_safetensors(dir + "/x.safetensors").tensors.at("t").to_vector<float>(),
            (std::vector<float>{1, 1, 1}));
}

TEST(Safetensors, ByteLayoutIsTheStandardOne) {
  StateDict s;
  s.set("x", from_vector<float>({1.5f}, {1}));
  // With hashes: standard metadata, the header's own hash first.
  save_safetensors(temp_path("l.safetensors"), s, {}, ContentHashes::kWrite);
  EXPECT_EQ(read_bytes(temp_path("l.safetensors")).find("{\"__metadata__\":{\"header_crc32\":\""), 8u);
  EXPECT_NE(read_bytes(temp_path("l.safetensors")).find("\"crc32.x\":\""), std::string::npos);
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

// Loads a file holding `header` and `data_bytes` zero bytes of data; it must fail with an
// Error naming the file and containing every one of `parts`.
void expect_header_error(const std::string& header, size_t data_bytes,
                         const std::vector<std::string>& parts) {
  const std::string err = error_loading(header_file(header, data_bytes));
  std::cout << header << "\n  -> " << err << "\n";  // the log lists each case and its message
  EXPECT_NE(err, "") << "no error for " << header;
  EXPECT_NE(err.find("bad.safetensors"), std::string::npos) << err;
  for (const std::string& part : parts) EXPECT_NE(err.find(part), std::string::npos) << err;
}

std::string entry(const std::string& name, const std::string& dtype, const std::string& shape,
                  const std::string& offsets) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape +
         ",\"data_offsets\":" + offsets + "}";
}

TEST(Safetensors, MalformedEscapesNameTheFileAndPosition) {
  // Not four hex digits (std::stoi once threw its own std::invalid_argument here, or read "+123"
  // and " 123" as numbers): nlohmann-json's lexer names it and the byte where it stopped.
  for (const auto& [bad, byte] : std::vector<std::pair<std::string, int>>{
           {"\\u12G4", 8}, {"\\u+123", 6}, {"\\u 123", 6}, {"\\uXYZW", 6}}) {
    expect_header_error("{" + entry("x" + bad, "U8", "[1]", "[0,1]") + "}", 1,
                        {"'\\u' must be followed by 4 hex digits", "at byte " + std::to_string(byte)});
  }
  // Cut short by the end of the header.
  expect_header_error("{\"x\\u00", 0, {"'\\u' must be followed by 4 hex digits", "at byte 8"});
  // A lone or reversed surrogate is not a character.
  expect_header_error("{" + entry("x\\ud800", "U8", "[1]", "[0,1]") + "}", 1,
                      {"surrogate U+D800..U+DBFF must be followed by U+DC00..U+DFFF", "at byte 10"});
  expect_header_error("{" + entry("x\\udc00\\ud800", "U8", "[1]", "[0,1]") + "}", 1,
                      {"surrogate U+DC00..U+DFFF must follow U+D800..U+DBFF", "at byte 9"});
  // Escapes JSON does not have, and raw control characters.
  expect_header_error("{" + entry("x\\q", "U8", "[1]", "[0,1]") + "}", 1,
                      {"forbidden character after backslash", "at byte 5"});
  expect_header_error("{" + entry("x\ty", "U8", "[1]", "[0,1]") + "}", 1,
                      {"control character U+0009 (HT) must be escaped", "at byte 4"});
  // Inside an entry, the error names it.
  expect_header_error("{" + entry("w", "F\\u00", "[1]", "[0,4]") + "}", 4,
                      {"entry 'w'", "'\\u' must be followed by 4 hex digits", "at byte 21"});
}

TEST(Safetensors, EscapesDecodeToUtf8) {
  const std::string header = "{\"__metadata__\":{\"k\":\"\\u00e9\\u20ac\\ud83d\\ude00\\n\\/\"}," +
                             entry("a\\u0000b", "U8", "[1]", "[0,1]") + "}";
  write_bytes(temp_path("utf8.safetensors"), header_file(header, 1));
  const SafetensorsFile f = load_safetensors(temp_path("utf8.safetensors"));
  EXPECT_EQ(f.metadata.at("k"), "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\n/");
  EXPECT_TRUE(f.tensors.contains(std::string("a\0b", 3)));
  // Control characters and non-ASCII text round trip through the writer.
  StateDict s;
  s.set(std::string("t\x01\n\"\\\xC3\xA9", 7), zeros({1}));
  save_safetensors(temp_path("names.safetensors"), s, {{"tab\t", "\x1f"}});
  const SafetensorsFile g = load_safetensors(temp_path("names.safetensors"));
  EXPECT_TRUE(g.tensors.contains(std::string("t\x01\n\"\\\xC3\xA9", 7)));
  EXPECT_EQ(g.metadata.at("tab\t"), "\x1f");
  // JSON holds UTF-8 text only: a name that is not is refused on saving, and on loading.
  StateDict latin1;
  latin1.set("caf\xE9", zeros({1}));
  testing::expect_error([&] { save_safetensors(temp_path("latin1.safetensors"), latin1); },
                        "tensor name 'caf\\xe9' is not UTF-8 text");
  expect_header_error("{" + entry("caf\xE9", "U8", "[1]", "[0,1]") + "}", 1,
                      {"ill-formed UTF-8 byte", "at byte 7"});
}

TEST(Safetensors, MalformedNumbersNameTheFileAndPosition) {
  // JSON numbers that are not non-negative integers: read, then refused naming the value.
  for (const auto& [bad, shown] : std::vector<std::pair<std::string, std::string>>{
           {"1.5", "1.5"}, {"-1", "-1"}, {"1e3", "1000.0"}, {"true", "true"}}) {
    expect_header_error("{" + entry("x", "U8", "[" + bad + "]", "[0,1]") + "}", 1,
                        {"entry 'x'", "field 'shape' holds " + shown,
                         "expected a non-negative integer of at most 64 bits"});
  }
  // Not JSON numbers at all: the lexer's error and the byte.
  for (const auto& [bad, byte] : std::vector<std::pair<std::string, int>>{
           {"01", 30}, {"+1", 29}, {"0x10", 30}}) {
    expect_header_error("{" + entry("x", "U8", "[" + bad + "]", "[0,1]") + "}", 1,
                        {"entry 'x'", "syntax error while parsing", "at byte " + std::to_string(byte)});
  }
  // 2^64 is read as a double.
  expect_header_error("{" + entry("x", "U8", "[1]", "[0,18446744073709551616]") + "}", 1,
                      {"entry 'x'", "field 'data_offsets' holds 1.8446744073709552e+19",
                       "at most 64 bits"});
  expect_header_error("{\"x\":{\"dtype\":\"U8\",\"shape\":[1,", 0,
                      {"entry 'x'", "unexpected end of input", "at byte 31"});
  // Beyond a double's range.
  expect_header_error("{" + entry("x", "U8", "[1e999]", "[0,1]") + "}", 1,
                      {"entry 'x'", "number overflow parsing '1e999'"});
}

TEST(Safetensors, ShapeWhoseByteCountOverflowsIsRejected) {
  // 2^32 * 2^32 * 16 elements: the element count wraps to 0 in 64 bits and used to load as a
  // tensor that claims 2^68 elements over no data.
  expect_header_error("{" + entry("big", "F32", "[4294967296,4294967296,16]", "[0,0]") + "}", 0,
                      {"entry 'big'", "overflows 64 bits"});
  // Fits as elements (2^62) but not as bytes (2^64).
  expect_header_error("{" + entry("big", "F32", "[4611686018427387904]", "[0,0]") + "}", 0,
                      {"entry 'big'", "overflows 64 bits"});
  // No elements, but strides that do not fit in int64.
  expect_header_error("{" + entry("big", "F32", "[0,4294967296,4294967296]", "[0,0]") + "}", 0,
                      {"entry 'big'", "overflows 64 bits"});
  // A dimension that is not an int64.
  expect_header_error("{" + entry("big", "U8", "[9223372036854775808]", "[0,0]") + "}", 0,
                      {"entry 'big'", "overflows 64 bits"});
  // Offsets near 2^64 are compared without wrapping.
  expect_header_error(
      "{" + entry("x", "U8", "[1]", "[18446744073709551615,0]") + "}", 0,
      {"entry 'x'", "data_offsets [18446744073709551615, 0]"});
}

TEST(Safetensors, DuplicateNamesAreRejected) {
  expect_header_error(
      "{" + entry("x", "U8", "[1]", "[0,1]") + "," + entry("x", "U8", "[1]", "[1,2]") + "}", 2,
      {"entry 'x' appears twice"});
  expect_header_error("{\"__metadata__\":{},\"__metadata__\":{}}", 0,
                      {"'__metadata__' appears twice"});
  expect_header_error("{\"__metadata__\":{\"a\":\"1\",\"a\":\"2\"}}", 0,
                      {"metadata key 'a' appears twice"});
  expect_header_error(
      "{\"x\":{\"dtype\":\"U8\",\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
      {"entry 'x'", "field 'dtype' appears twice"});
}


// Content hashes (issue 49): a flipped bit in any tensor's data is refused with an error naming
// the file and that tensor (crc32 of its bytes, kept in the metadata); one in the header (JSON,
// padding or the 8-byte length) is refused too, naming the header.
TEST(Safetensors, AFlippedBitAnywhereIsRefusedNamingTheTensor) {
  const std::string path = temp_path("hashed.safetensors");
  save_safetensors(path, sample(), {{"epoch", "3"}}, ContentHashes::kWrite);
  const std::string good = read_bytes(path);
  const SafetensorsHeader h = read_safetensors_header(path);
  const std::string bad = temp_path("flipped.safetensors");
  for (const SafetensorsHeader::Entry& e : h.entries) {
    if (e.end == e.begin) continue;
    std::string bytes = good;
    bytes[h.data_start + (e.begin + e.end) / 2] ^= 0x10;
    write_bytes(bad, bytes);
    testing::expect_error([&] { load_safetensors(bad); }, "'" + bad + "'");
    testing::expect_error([&] { load_safetensors(bad); }, "tensor '" + e.name + "'");
  }
  // Every bit of the header: refused (or, for the few flips the JSON reader names first, an
  // error all the same), never loaded.
  for (uint64_t at = 0; at < h.data_start; ++at) {
    std::string bytes = good;
    bytes[at] ^= static_cast<char>(1 << (at % 8));
    write_bytes(bad, bytes);
    EXPECT_THROW(load_safetensors(bad), Error) << "byte " << at;
  }
}

// A file written without hashes (by an earlier tessera, or another tool) still loads, and says
// so; its tensors are not checked.
TEST(Safetensors, FilesWithoutHashesLoadAndSaySo) {
  const std::string path = temp_path("plain_layout.safetensors");
  save_safetensors(path, sample(), {{"epoch", "3"}}, ContentHashes::kOmit);
  const SafetensorsFile f = load_safetensors(path);
  EXPECT_FALSE(f.hashed);
  EXPECT_EQ(f.metadata.at("epoch"), "3");
  save_safetensors(path, sample(), {{"epoch", "3"}}, ContentHashes::kWrite);
  const SafetensorsFile g = load_safetensors(path);
  EXPECT_TRUE(g.hashed);
  EXPECT_EQ(g.metadata.size(), 1u);  // the hashes are not the caller's metadata
  testing::expect_error([&] { save_safetensors(path, sample(), {{"crc32.w", "0"}}); }, "reserved");
  // Written without being asked for (weights files, other tools' layout): none.
  save_safetensors(path, sample());
  EXPECT_FALSE(load_safetensors(path).hashed);
}

}  // namespace
}  // namespace tessera
