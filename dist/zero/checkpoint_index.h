// The index of a sharded checkpoint: which parameter lives where in which flat vector, which
// element ranges each rank's file holds, and how to read any range back from those files.
//
// A checkpoint describes one or more flat vectors (ZeRO-1/2: one, "flat"; ZeRO-3: one per
// unit). Parameter p of vector v occupies [offset_p, offset_p + numel_p) of v; rank r's file
// holds the part [b_rv, e_rv) of every vector v (padding is never written):
//
//   vector 0 "flat":   [ w0 ........ | b0 .. | w1 .............. | b1 . ]   total 14
//   files (N = 3):     [ rank 0: 0-4    | rank 1: 5-9     | rank 2: 10-13 ]
//
//   shard-00002-of-00003.safetensors   (rank 1)
//     "vector.0.param"          elements 5-9 of the master values (f32 for f16/bf16 models)
//     "vector.0.state.exp_avg"  elements 5-9 of Adam's first moment, ... one per state key
//
// The index records the crc32 of each shard file's header, and each header the crc32 of each of
// its tensors: a flipped bit anywhere (index, shard header, tensor data) is refused, naming the
// file and, for data, the tensor. The readers check the headers when they open the files and
// each tensor the first time they read any of its elements.
//
// A reader that wants elements [a, b) of parameter p (on any new world size) asks the index:
// p is in v at offset o, so it needs [o + a, o + b) of v; it intersects that range with every
// file's [b_rv, e_rv) and reads exactly those elements (read_safetensors_elements seeks to
// them). No communication: a file on a shared file system is readable by every rank.
//
// A full (unsharded) checkpoint of dist/checkpoint.h is described by the same index: one
// vector per parameter, one "file" held in memory. So full -> sharded, sharded -> full and
// sharded -> sharded are the same read.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "dist/checkpoint.h"
#include "dist/zero/partition.h"
#include "tensor/safetensors.h"
#include "tensor/state_dict.h"

namespace tessera {
namespace dist {
namespace zero {

struct IndexParam {
  std::string name;  // the model's own (dotted) name
  Shape shape;
  DType dtype;       // the model's parameter dtype ("param" values are kept at master precision)
  int vector = 0;    // which flat vector
  int64_t offset = 0;  // where it starts in that vector
};

struct IndexVector {
  std::string name;  // "flat" (ZeRO-1/2) or the unit's name (ZeRO-3)
  int64_t total = 0;   // elements without padding
  int64_t padded = 0;  // with the writer's padding (information only: padding is not saved)
};

struct CheckpointIndex {
  std::string dir;       // where it was read from, for messages
  std::string strategy;  // "zero1", "zero2", "zero3" or "full"
  int64_t id = 0;        // one random number per save, in the index and in every shard file
  // Content hashes: the crc32 of every shard file's header (which holds the crc32 of each of its
  // tensors, tensor/safetensors.h), so the index vouches for every byte of the checkpoint. The
  // index's own tensors and header carry theirs. False for an index written before the hashes,
  // read unchecked.
  bool hashed = false;
  std::vector<uint32_t> file_crc32;  // [rank], when hashed
  std::vector<IndexVector> vectors;
  std::vector<IndexParam> params;
  std::vector<std::vector<Range>> files;  // [rank][vector]: the elements that rank's file holds
  // Optimizer state: present when the optimizer had stepped. Every element-wise state tensor
  // (exp_avg, exp_avg_sq, momentum_buffer, ...) is sharded like the parameters; the step
  // count, equal for every element, and the options (param groups) are kept here.
  bool has_optimizer = false;
  bool has_state = false;
  int64_t step = 0;
  std::vector<std::string> state_keys;
  StateDict param_groups;  // "param_groups.G.NAME"
  StateDict buffers;       // the model's buffers (BatchNorm statistics), under their names
  TrainingProgress progress;
  // The caller's own strings (the train tool: its loss scaler's state, the model's name), as a
  // full checkpoint's metadata carries them; "extra.KEY" entries of the index's metadata.
  Metadata extra;

  int world_size() const { return static_cast<int>(files.size()); }
  // nullptr when absent.
  const IndexParam* find(const std::string& name) const;
};

// "DIR/shard-00002-of-00003.safetensors" for rank 1 of 3, "DIR/index.safetensors".
std::string shard_file_name(const std::string& dir, int rank, int world_size);
std::string index_file_name(const std::string& dir);

// Rank 0 writes the index (atomically) after every shard file is in place: it commits the
// checkpoint. `before_rename`: a testing aid (tensor/atomic_file.h).
void write_index(const CheckpointIndex& index, const std::function<void()>& before_rename = {});
// Reads and checks the index (its layout is consistent: parameters inside their vectors without
// overlap, the files' ranges tiling each vector), with errors naming the file and the values.
CheckpointIndex read_index(const std::string& dir);

// Where the element ranges are read from: the shard files of an index (their headers read and
// checked against the index once), or tensors in memory (a full checkpoint).
class ShardReader {
 public:
  // Opens and checks every file of the index: present, written by the same save (id), holding
  // for each vector the tensors of the index's size. Reading every header on every rank makes
  // these errors identical everywhere.
  explicit ShardReader(const CheckpointIndex& index);
  // A single in-memory "file" holding "vector.V.param" and "vector.V.state.KEY" tensors.
  ShardReader(const CheckpointIndex& index, StateDict in_memory);

  // Writes into `out` (1-D, of part.size() elements, any floating dtype) the elements `part`
  // (relative to the parameter's first element) of parameter `name`'s `what`: "param" or a
  // state key.
  void read(const std::string& name, const std::string& what, const Range& part,
            Tensor out) const;
  const CheckpointIndex& index() const { return index_; }
  // Reads every tensor of every file whole and checks its hash (read() checks only the tensors
  // it reads from).
  void verify_all() const;

 private:
  // Checks tensor `tensor` of rank r's file the first time it is read.
  void verify_once(int r, const std::string& tensor) const;

  const CheckpointIndex& index_;
  std::vector<SafetensorsHeader> headers_;
  mutable std::vector<std::set<std::string>> verified_;  // [rank]: tensors whose hash is checked
  StateDict in_memory_;
};

// The name of vector v's tensor `what` in a shard file: "vector.0.param", "vector.0.state.exp_avg".
std::string shard_tensor_name(int vector, const std::string& what);

}  // namespace zero
}  // namespace dist
}  // namespace tessera
