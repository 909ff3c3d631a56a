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
//
// Content hashes. Asked to (ContentHashes::kWrite: the checkpoints of dist/ do), save_safetensors
// keeps in the metadata the crc32 (zlib's) of every tensor's bytes and of the header itself:
//
//   {"__metadata__":{"header_crc32":"9a0f31c2","crc32.w":"1b2c3d4e",...,"epoch":"3"},"w":{...}}
//
// "header_crc32" always comes first, so a reader finds it at a fixed place; it is the crc32 of
// the 8-byte length and the header with its own value written as "00000000". The readers check
// both when a file has them: a flipped bit in a tensor's data is refused naming the file and the
// tensor, anywhere in the header (JSON, padding, the length) naming the header. crc32 detects
// every error of up to 3 bits in files this size and every burst of up to 32 bits: what disks,
// networks and torn writes do (it is no defence against someone forging a file). Files without
// hashes (other tools', tessera's before them, weights files) load as before, with `hashed`
// false. A file is hashed when it has any hash key, and then it must have all of them: one
// flipped bit cannot make a hashed file pass for one without. The hash keys are never part of
// the metadata handed back, and a caller's metadata may not use them.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "tensor/state_dict.h"

namespace tessera {

using Metadata = std::map<std::string, std::string>;

enum class ContentHashes { kWrite, kOmit };

// Returns the crc32 of the header written (0 with kOmit), for a file that vouches for this one
// (a sharded checkpoint's index records its shards'). `before_rename`, a testing aid, is called
// once the temporary file is written, before it is renamed into place (tensor/atomic_file.h).
uint32_t save_safetensors(const std::string& path, const StateDict& tensors,
                          const Metadata& metadata = {},
                          ContentHashes hashes = ContentHashes::kOmit,
                          const std::function<void()>& before_rename = {});

struct SafetensorsFile {
  StateDict tensors;  // CPU tensors, in the file's data order
  Metadata metadata;  // without the hash keys
  bool hashed = false;  // the file carries content hashes (all of them checked)
  uint32_t header_crc32 = 0;
};
// Every hash checked when the file has them.
SafetensorsFile load_safetensors(const std::string& path);

// The header alone, checked as load_safetensors checks it, for readers that need a few ranges
// of a large file (the sharded checkpoints of dist/zero/sharded_checkpoint.h).
struct SafetensorsHeader {
  struct Entry {
    std::string name;
    DType dtype;
    Shape shape;
    uint64_t begin = 0, end = 0;  // byte range within the data
    uint32_t crc32 = 0;           // of the data's bytes, when the file is hashed
  };
  std::vector<Entry> entries;  // in data order
  Metadata metadata;           // without the hash keys
  bool hashed = false;
  uint32_t header_crc32 = 0;   // checked against the header as it was read
  uint64_t data_start = 0;  // file offset of the data
  uint64_t data_size = 0;   // bytes of data
  const Entry* find(const std::string& name) const;  // nullptr when absent
};
// The header's own hash is checked; the tensors' need their data (below).
SafetensorsHeader read_safetensors_header(const std::string& path);
// Reads tensor `name`'s bytes in pieces and checks them against its crc32 (nothing to check in
// a file without hashes); an error naming the file and the tensor.
void verify_safetensors_tensor(const std::string& path, const SafetensorsHeader& header,
                               const std::string& name);
// The header and every tensor checked, as load_safetensors checks them, without keeping the data.
SafetensorsHeader verify_safetensors(const std::string& path);
// Elements [first, first + count) of tensor `name` (row-major), as a 1-D CPU tensor, reading
// only their bytes (unchecked: verify_safetensors_tensor checks the whole tensor).
Tensor read_safetensors_elements(const std::string& path, const SafetensorsHeader& header,
                                 const std::string& name, int64_t first, int64_t count);

}  // namespace tessera
