// A seeded mutation fuzz test of the safetensors reader: valid files edited at random (see
// mutate.h) must either load or throw tessera::Error, never crash, hang, read out of bounds
// (run under AddressSanitizer to see those) or throw anything else. The iteration count is
// fixed so the test runs in CI; a failing input is written to $TEST_UNDECLARED_OUTPUTS_DIR.
#include <gtest/gtest.h>

#include <cstdio>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>

#include "tensor/ops.h"
#include "tensor/safetensors.h"
#include "tests/util/fuzz_tally.h"
#include "tests/util/mutate.h"
#include "tests/util/test_util.h"

namespace tessera {
namespace {

using tessera::testing::LengthField;
using tessera::testing::FuzzTally;
using tessera::testing::Mutator;
using tessera::testing::temp_path;

constexpr int kIterations = 4000;

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Removes the file first: ext4 flushes a file truncated and rewritten in place on close
// (auto_da_alloc), which made each iteration cost a disk write.
void write_bytes(const std::string& path, const std::string& bytes) {
  std::remove(path.c_str());
  std::ofstream(path, std::ios::binary).write(bytes.data(), bytes.size());
}

// Valid files to start from: every dtype, empty and 0-dim tensors, metadata with escapes.
std::vector<std::string> seeds() {
  StateDict a;
  a.set("w", randn({3, 4}));
  a.set("d", randn({2}, kF64));
  a.set("h", randn({5}).to(kF16));
  a.set("b", randn({2, 2}).to(kBF16));
  a.set("step", scalar_tensor(7, kI64));
  a.set("i", from_vector<int32_t>({1, -2}, {2}));
  a.set("u", from_vector<uint8_t>({255, 0, 3}, {3}));
  a.set("flag", gt(randn({4}), 0.0));
  a.set("empty", zeros({0, 3}));
  StateDict b;
  b.set("x\t\"\\\xC3\xA9", ones({1}));
  std::vector<std::string> out;
  save_safetensors(temp_path("seed_a.safetensors"), a, {{"format", "f\n\x01"}, {"epoch", "3"}});
  save_safetensors(temp_path("seed_b.safetensors"), b);
  save_safetensors(temp_path("seed_c.safetensors"), StateDict());
  for (const char* name : {"seed_a.safetensors", "seed_b.safetensors", "seed_c.safetensors"}) {
    out.push_back(read_bytes(temp_path(name)));
  }
  return out;
}

// A file from a (possibly mutated) header text and data, its length field consistent.
std::string assemble(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  for (int b = 0; b < 8; ++b) out[b] = static_cast<char>((header.size() >> (8 * b)) & 0xFF);
  return out + header + data;
}

// What the header parser branches on.
const std::vector<std::string> kTokens = {
    "\"dtype\"", "\"shape\"", "\"data_offsets\"", "\"__metadata__\"", "\"F32\"", "\"I32\"",
    "\"BOOL\"", "\"BF16\"", "\\u", "\\ud800", "\\udc00", "\\u00e9", "\\", "\"", "{", "}", "[",
    "]", ",", ":", "[]", "{}", "0", "-1", "1.5", "1e9", "01", "18446744073709551615",
    "18446744073709551616", "9223372036854775808", "4294967296", " ", "\n"};

// Half the iterations edit the raw bytes (the length field included); the other half edit the
// header text and data apart and reassemble them with a consistent length, so that the edits
// reach the JSON reader and the entry checks instead of stopping at the length check.
TEST(SafetensorsFuzz, MutatedFilesLoadOrThrowError) {
  const std::vector<std::string> files = seeds();
  Mutator raw(20261123, kTokens, {{0, 8, false}});  // the header length: 8 bytes, little-endian
  Mutator text(1123, kTokens, {});
  const std::string path = temp_path("fuzz.safetensors");
  FuzzTally tally;
  const auto start = std::chrono::steady_clock::now();
  for (int it = 0; it < kIterations; ++it) {
    const std::string& seed = files[it % files.size()];
    std::string bytes;
    if (it % 2 == 0) {
      bytes = seed;
      raw.mutate(bytes, 1 + static_cast<int>(raw.below(4)));
    } else {
      uint64_t n = 0;
      for (int b = 7; b >= 0; --b) n = (n << 8) | static_cast<unsigned char>(seed[b]);
      std::string header = seed.substr(8, n), data = seed.substr(8 + n);
      text.mutate(header, 1 + static_cast<int>(text.below(3)));
      if (text.below(4) == 0) text.mutate(data, 1);
      bytes = assemble(header, data);
    }
    write_bytes(path, bytes);
    const std::string failure = tally.run([&] {
      const SafetensorsFile f = load_safetensors(path);
      // Touch every byte of every tensor: a shape that overstated its data would show here
      // (as a wrong count, or under AddressSanitizer as a read out of bounds).
      uint64_t sum = 0;
      for (const auto& [name, t] : f.tensors) {
        ASSERT_EQ(t.nbytes(), static_cast<size_t>(t.numel()) * t.element_size()) << name;
        const unsigned char* p = static_cast<const unsigned char*>(t.raw_data());
        for (size_t k = 0; k < t.nbytes(); ++k) sum += p[k];
      }
      if (sum == 1) std::cout << "";  // keeps the reads
    });
    if (!failure.empty()) {
      if (const char* dir = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR")) {
        write_bytes(std::string(dir) + "/failing.safetensors", bytes);
      }
      FAIL() << "iteration " << it << ": " << failure;
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  tally.print(std::cout, kIterations, seconds);
  // Both outcomes occur: the edits reach past the first checks.
  EXPECT_GT(tally.loaded, 0);
  EXPECT_GT(tally.rejected, 0);
}

}  // namespace
}  // namespace tessera
