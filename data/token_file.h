// Token files in llm.c's layout (karpathy/llm.c, dev/data/data_common.py), so that either
// project reads the other's:
//
//   header   256 x int32, little-endian: [0] magic 20240520, [1] version 1, [2] token count,
//            the rest 0                                                       (1024 bytes)
//   tokens   count x uint16, little-endian                                    (2 x count bytes)
//
// Version 1 is GPT-2's vocabulary (50,257 ids fit 16 bits); llm.c's version 2 (uint32 tokens,
// Llama 3) is refused by name. read_token_file checks the magic, the version and that the
// file is exactly 1024 + 2 x count bytes long, so a file cut short or grown is an error naming
// the file and both sizes. write_token_file writes atomically (a reader sees the old file or
// the whole new one: several ranks may tokenize and store the same data at once).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera {
namespace data {

inline constexpr int32_t kTokenFileMagic = 20240520;
inline constexpr int32_t kTokenFileVersion = 1;
inline constexpr int64_t kTokenFileHeaderInts = 256;

// An Error if a token is outside [0, 65536) or the file cannot be written.
void write_token_file(const std::string& path, const std::vector<int32_t>& tokens);
void write_token_file(const std::string& path, const std::vector<uint16_t>& tokens);
std::vector<uint16_t> read_token_file(const std::string& path);

}  // namespace data
}  // namespace tessera
