// The safetensors header's JSON, read with nlohmann-json and checked against the format: one
// object whose "__metadata__" maps strings to strings and whose every other key names a tensor,
//
//   {"__metadata__": {"k": "v"}, "w": {"dtype": "F32", "shape": [3, 4], "data_offsets": [0, 48]}}
//
// shape and data_offsets holding non-negative integers of at most 64 bits. A key twice in one
// object is an error (nlohmann-json would keep the last one: the parser callback sees each key as
// it is read), and so is a field the format does not have. Every error is a tessera::Error naming
// the file and the entry being read, and for the JSON's own syntax the byte where it broke.
// (What the entries mean, dtypes, sizes and offsets, is checked by safetensors.cc.)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensor/safetensors.h"

namespace tessera {
namespace safetensors_json {

struct HeaderEntry {
  std::string name, dtype;
  std::vector<uint64_t> shape, offsets;
};

// The entries in the header's order, and the metadata.
void read_header(const std::string& text, const std::string& path, std::vector<HeaderEntry>& entries,
                 Metadata& metadata);

// A string as JSON writes it, quoted and escaped (the header's writer); throws naming `what`
// when it is not UTF-8, which JSON cannot hold.
std::string quoted(const std::string& s, const std::string& what);

// A name or value read from a file, as it appears in an error message: control and non-ASCII
// bytes escaped, text past `limit` bytes cut, so a corrupt header cannot fill the terminal.
std::string printable(const std::string& s, size_t limit = 80);

}  // namespace safetensors_json
}  // namespace tessera
