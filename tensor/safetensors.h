// Named tensors in the safetensors layout (Hugging Face), so other tools can read the weights:
//
//   [8 bytes: header length N, little-endian u64][N bytes: JSON header][raw data]
//   header: {"__metadata__": {"key": "value", ...},
//            "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...}
//
// Offsets are relative to the start of the data, little-endian element bytes, row-major.
// save_safetensors writes to a temporary file in the same directory, flushes it to disk and
// renames it over `path`, so a crash never leaves a half-written file behind. load checks the
// header length; the JSON (strict escapes and surrogates, decoded to UTF-8; integers only, within
// 64 bits; no duplicate names), with the byte where it goes wrong; every dtype, shape (element
// and byte counts within 64 bits) and offset pair (in bounds, of the size its shape needs, the
// ranges tiling the data exactly); and names the file and entry in every error. Whether a dtype
// is the one a caller expects is the caller's check (dist/checkpoint.h, the optimizers).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "tensor/state_dict.h"

namespace tessera {

using Metadata = std::map<std::string, std::string>;

void save_safetensors(const std::string& path, const StateDict& tensors,
                      const Metadata& metadata = {});

struct SafetensorsFile {
  StateDict tensors;  // CPU tensors, in the file's data order
  Metadata metadata;
};
SafetensorsFile load_safetensors(const std::string& path);

// The header alone, checked as load_safetensors checks it, for readers that need a few ranges
// of a large file (the sharded checkpoints of dist/zero/sharded_checkpoint.h).
struct SafetensorsHeader {
  struct Entry {
    std::string name;
    DType dtype;
    Shape shape;
    uint64_t begin = 0, end = 0;  // byte range within the data
  };
  std::vector<Entry> entries;  // in data order
  Metadata metadata;
  uint64_t data_start = 0;  // file offset of the data
  uint64_t data_size = 0;   // bytes of data
  const Entry* find(const std::string& name) const;  // nullptr when absent
};
SafetensorsHeader read_safetensors_header(const std::string& path);
// Elements [first, first + count) of tensor `name` (row-major), as a 1-D CPU tensor, reading
// only their bytes.
Tensor read_safetensors_elements(const std::string& path, const SafetensorsHeader& header,
                                 const std::string& name, int64_t first, int64_t count);

}  // namespace tessera
