#include "dist/zero/checkpoint_index.h"

#include <cstdio>
#include <sys/stat.h>

#include "tensor/ops.h"

namespace tessera {
namespace dist {
namespace zero {

namespace {

// Unchanged by the content hashes ("file_crc32" and the hash keys, which readers before skip).
constexpr const char* kFormat = "tessera-sharded-checkpoint-1";

// Index layout, in index.safetensors. Numbers are i64 tensors (checked by the safetensors
// reader, nothing to parse), strings are metadata:
//   tensors   "id" [1], "vectors" [V, 2] (total, padded), "params" [P, 2] (vector, offset),
//             "param.P.shape" [dims], "files" [N, V, 2] (begin, end), "progress" [4] (epoch,
//             step, rng seed, rng offset), "optimizer" [3] (has optimizer, has state, step),
//             "file_crc32" [N] (each shard file's header's crc32),
//             "optimizer.param_groups.G.NAME" (f64), "model.BUFFER" (the buffers)
//   metadata  "format", "strategy", "vector.V.name", "param.P.name", "param.P.dtype",
//             "state_key.J", "file.R" (the file names, for people reading the index)

Tensor i64_tensor(const std::vector<int64_t>& values, const Shape& shape) {
  return from_vector(values, shape);
}

std::vector<int64_t> i64_values(const SafetensorsFile& file, const std::string& key,
                                const Shape& shape, const std::string& path) {
  const Tensor* t = file.tensors.find(key);
  TS_CHECK(t != nullptr, "load_sharded_checkpoint: '", path, "' has no tensor '", key,
           "' (not a ", kFormat, " index?)");
  TS_CHECK(t->dtype() == kI64, "load_sharded_checkpoint: '", path, "': '", key, "' is ",
           t->dtype(), ", expected i64");
  TS_CHECK(t->shape() == shape, "load_sharded_checkpoint: '", path, "': '", key,
           "' has shape ", t->shape(), ", expected ", shape);
  const int64_t* p = t->data<int64_t>();
  return std::vector<int64_t>(p, p + t->numel());
}

const std::string& meta(const SafetensorsFile& file, const std::string& key,
                        const std::string& path) {
  const auto it = file.metadata.find(key);
  TS_CHECK(it != file.metadata.end(), "load_sharded_checkpoint: '", path, "' has no metadata '",
           key, "'");
  return it->second;
}

DType parse_dtype_name(const std::string& name, const std::string& path) {
  for (DType d : {kF32, kF64, kF16, kBF16, kI64, kI32, kU8, kBool}) {
    if (name == dtype_name(d)) return d;
  }
  TS_FAIL("load_sharded_checkpoint: '", path, "': unknown dtype '", name, "'");
}

}  // namespace

const IndexParam* CheckpointIndex::find(const std::string& name) const {
  for (const IndexParam& p : params) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

std::string shard_file_name(const std::string& dir, int rank, int world_size) {
  char name[64];
  std::snprintf(name, sizeof(name), "shard-%05d-of-%05d.safetensors", rank + 1, world_size);
  return dir + "/" + name;
}

std::string index_file_name(const std::string& dir) { return dir + "/" + kIndexFile; }

std::string shard_tensor_name(int vector, const std::string& what) {
  return "vector." + std::to_string(vector) + "." + (what == "param" ? what : "state." + what);
}

void write_index(const CheckpointIndex& index, const std::function<void()>& before_rename) {
  StateDict t;
  Metadata m;
  m["format"] = kFormat;
  m["strategy"] = index.strategy;
  for (const auto& [key, value] : index.extra) m["extra." + key] = value;
  t.set("id", i64_tensor({index.id}, {1}));
  std::vector<int64_t> vectors, params, files;
  for (size_t v = 0; v < index.vectors.size(); ++v) {
    m["vector." + std::to_string(v) + ".name"] = index.vectors[v].name;
    vectors.insert(vectors.end(), {index.vectors[v].total, index.vectors[v].padded});
  }
  t.set("vectors", i64_tensor(vectors, {static_cast<int64_t>(index.vectors.size()), 2}));
  for (size_t p = 0; p < index.params.size(); ++p) {
    const IndexParam& param = index.params[p];
    m["param." + std::to_string(p) + ".name"] = param.name;
    m["param." + std::to_string(p) + ".dtype"] = dtype_name(param.dtype);
    t.set("param." + std::to_string(p) + ".shape",
          i64_tensor(param.shape, {static_cast<int64_t>(param.shape.size())}));
    params.insert(params.end(), {param.vector, param.offset});
  }
  t.set("params", i64_tensor(params, {static_cast<int64_t>(index.params.size()), 2}));
  for (int r = 0; r < index.world_size(); ++r) {
    const std::string file = shard_file_name(index.dir, r, index.world_size());
    m["file." + std::to_string(r)] = file.substr(file.rfind('/') + 1);
    for (const Range& range : index.files[r]) files.insert(files.end(), {range.begin, range.end});
  }
  t.set("files", i64_tensor(files, {index.world_size(), static_cast<int64_t>(index.vectors.size()), 2}));
  TS_INTERNAL_ASSERT(static_cast<int>(index.file_crc32.size()) == index.world_size(),
                     "write_index: ", index.file_crc32.size(), " shard hashes for ",
                     index.world_size(), " files");
  t.set("file_crc32", i64_tensor(std::vector<int64_t>(index.file_crc32.begin(), index.file_crc32.end()),
                                 {index.world_size()}));
  const TrainingProgress& pr = index.progress;
  t.set("progress", i64_tensor({pr.epoch, pr.step, static_cast<int64_t>(pr.rng.seed),
                                static_cast<int64_t>(pr.rng.offset)}, {4}));
  t.set("optimizer", i64_tensor({index.has_optimizer, index.has_state, index.step}, {3}));
  for (size_t j = 0; j < index.state_keys.size(); ++j) {
    m["state_key." + std::to_string(j)] = index.state_keys[j];
  }
  t.merge(index.param_groups, "optimizer.");
  t.merge(index.buffers, "model.");
  save_safetensors(index_file_name(index.dir), t, m, ContentHashes::kWrite, before_rename);
}

namespace {

// The index's "vectors" table: each flat vector's name, total and padded size.
void read_vectors(const SafetensorsFile& file, const std::string& path, CheckpointIndex& index) {
  const Tensor* vt = file.tensors.find("vectors");
  TS_CHECK(vt != nullptr && vt->dim() == 2, "load_sharded_checkpoint: '", path,
           "': 'vectors' missing or not [V, 2]");
  const int64_t V = vt->size(0);
  const std::vector<int64_t> vectors = i64_values(file, "vectors", {V, 2}, path);
  for (int64_t v = 0; v < V; ++v) {
    index.vectors.push_back({meta(file, "vector." + std::to_string(v) + ".name", path),
                             vectors[2 * v], vectors[2 * v + 1]});
    TS_CHECK(vectors[2 * v] >= 0 && vectors[2 * v + 1] >= vectors[2 * v],
             "load_sharded_checkpoint: '", path, "': vector ", v, " has total ", vectors[2 * v],
             " and padded size ", vectors[2 * v + 1]);
  }
}

// The "params" table: each parameter's name, dtype, shape, vector and offset, laid end to end
// in its vector and covering it exactly.
void read_params(const SafetensorsFile& file, const std::string& path, CheckpointIndex& index) {
  const int64_t V = static_cast<int64_t>(index.vectors.size());
  const Tensor* pt = file.tensors.find("params");
  TS_CHECK(pt != nullptr && pt->dim() == 2, "load_sharded_checkpoint: '", path,
           "': 'params' missing or not [P, 2]");
  const int64_t P = pt->size(0);
  const std::vector<int64_t> params = i64_values(file, "params", {P, 2}, path);
  std::vector<int64_t> covered(V, 0);  // parameters are laid end to end in each vector
  for (int64_t p = 0; p < P; ++p) {
    const std::string k = "param." + std::to_string(p);
    IndexParam param;
    param.name = meta(file, k + ".name", path);
    param.dtype = parse_dtype_name(meta(file, k + ".dtype", path), path);
    const Tensor* shape = file.tensors.find(k + ".shape");
    TS_CHECK(shape != nullptr && shape->dim() == 1, "load_sharded_checkpoint: '", path, "': '",
             k, ".shape' missing or not 1-D");
    param.shape = i64_values(file, k + ".shape", {shape->size(0)}, path);
    param.vector = static_cast<int>(params[2 * p]);
    param.offset = params[2 * p + 1];
    TS_CHECK(param.vector >= 0 && param.vector < V, "load_sharded_checkpoint: '", path,
             "': parameter '", param.name, "' is in vector ", param.vector, " of ", V);
    TS_CHECK(param.offset == covered[param.vector], "load_sharded_checkpoint: '", path,
             "': parameter '", param.name, "' starts at ", param.offset, " of vector ",
             param.vector, ", expected ", covered[param.vector],
             " (parameters are laid end to end)");
    covered[param.vector] += numel(param.shape);
    TS_CHECK(index.find(param.name) == nullptr, "load_sharded_checkpoint: '", path,
             "': parameter '", param.name, "' appears twice");
    index.params.push_back(param);
  }
  for (int64_t v = 0; v < V; ++v) {
    TS_CHECK(covered[v] == index.vectors[v].total, "load_sharded_checkpoint: '", path,
             "': the parameters of vector ", v, " ('", index.vectors[v].name, "') hold ",
             covered[v], " elements but its total is ", index.vectors[v].total);
  }
}

// The "files" table: each rank's file's range of each vector, tiling it in rank order.
void read_files(const SafetensorsFile& file, const std::string& path, CheckpointIndex& index) {
  const int64_t V = static_cast<int64_t>(index.vectors.size());
  const Tensor* ft = file.tensors.find("files");
  TS_CHECK(ft != nullptr && ft->dim() == 3 && ft->size(0) >= 1, "load_sharded_checkpoint: '",
           path, "': 'files' missing or not [N, V, 2]");
  const int64_t N = ft->size(0);
  const std::vector<int64_t> files = i64_values(file, "files", {N, V, 2}, path);
  index.files.assign(N, std::vector<Range>(V));
  for (int64_t v = 0; v < V; ++v) {
    int64_t next = 0;  // the files' ranges tile [0, total) in rank order
    for (int64_t r = 0; r < N; ++r) {
      const Range range{files[(r * V + v) * 2], files[(r * V + v) * 2 + 1]};
      TS_CHECK(range.begin == next && range.end >= range.begin, "load_sharded_checkpoint: '",
               path, "': rank ", r, "'s file holds [", range.begin, ", ", range.end,
               ") of vector ", v, ", expected a range starting at ", next);
      index.files[r][v] = range;
      next = range.end;
    }
    TS_CHECK(next == index.vectors[v].total, "load_sharded_checkpoint: '", path,
             "': the files hold ", next, " elements of vector ", v, ", its total is ",
             index.vectors[v].total);
  }
}

// The progress, the optimizer's step, state keys and options, the buffers and the caller's
// strings.
void read_progress_and_state(const SafetensorsFile& file, const std::string& path,
                             CheckpointIndex& index) {
  const std::vector<int64_t> progress = i64_values(file, "progress", {4}, path);
  index.progress.epoch = progress[0];
  index.progress.step = progress[1];
  index.progress.rng.seed = static_cast<uint64_t>(progress[2]);
  index.progress.rng.offset = static_cast<uint64_t>(progress[3]);
  const std::vector<int64_t> optimizer = i64_values(file, "optimizer", {3}, path);
  index.has_optimizer = optimizer[0] != 0;
  index.has_state = optimizer[1] != 0;
  index.step = optimizer[2];
  for (int j = 0;; ++j) {
    const auto it = file.metadata.find("state_key." + std::to_string(j));
    if (it == file.metadata.end()) break;
    index.state_keys.push_back(it->second);
  }
  index.param_groups = file.tensors.with_prefix_removed("optimizer.");
  index.buffers = file.tensors.with_prefix_removed("model.");
  for (const auto& [key, value] : file.metadata) {
    if (key.compare(0, 6, "extra.") == 0) index.extra[key.substr(6)] = value;
  }
}

}  // namespace

CheckpointIndex read_index(const std::string& dir) {
  const std::string path = index_file_name(dir);
  struct stat st;
  TS_CHECK(::stat(path.c_str(), &st) == 0, "load_sharded_checkpoint: no index '", path,
           "' (not a sharded checkpoint directory, or its save did not finish: the index is "
           "written last)");
  const SafetensorsFile file = load_safetensors(path);  // its own hashes checked
  TS_CHECK(meta(file, "format", path) == kFormat, "load_sharded_checkpoint: '", path,
           "' has format '", meta(file, "format", path), "', expected '", kFormat, "'");
  CheckpointIndex index;
  index.dir = dir;
  index.hashed = file.hashed;
  index.strategy = meta(file, "strategy", path);
  index.id = i64_values(file, "id", {1}, path)[0];
  read_vectors(file, path, index);
  read_params(file, path, index);
  read_files(file, path, index);
  read_progress_and_state(file, path, index);
  if (index.hashed) {  // written with the hashes: the shards' are there too
    for (int64_t crc : i64_values(file, "file_crc32", {index.world_size()}, path)) {
      TS_CHECK(crc >= 0 && crc <= 0xFFFFFFFFll, "load_sharded_checkpoint: '", path,
               "': 'file_crc32' holds ", crc, ", not a crc32");
      index.file_crc32.push_back(static_cast<uint32_t>(crc));
    }
  }
  return index;
}

ShardReader::ShardReader(const CheckpointIndex& index) : index_(index) {
  for (int r = 0; r < index.world_size(); ++r) {
    const std::string path = shard_file_name(index.dir, r, index.world_size());
    struct stat st;
    TS_CHECK(::stat(path.c_str(), &st) == 0, "load_sharded_checkpoint: shard file '", path,
             "' (rank ", r, " of the ", index.world_size(), " that wrote '",
             index_file_name(index.dir), "') is missing");
    SafetensorsHeader header = read_safetensors_header(path);  // its own hash checked
    const auto id = header.metadata.find("id");
    TS_CHECK(id != header.metadata.end() && id->second == std::to_string(index.id),
             "load_sharded_checkpoint: '", path, "' was written by another save (its id is ",
             id == header.metadata.end() ? std::string("none") : id->second, ", the index's ",
             index.id, "): a save that did not finish, or files mixed from two checkpoints");
    for (size_t v = 0; v < index.vectors.size(); ++v) {
      std::vector<std::string> whats{"param"};
      if (index.has_state) whats.insert(whats.end(), index.state_keys.begin(), index.state_keys.end());
      for (const std::string& what : whats) {
        const std::string name = shard_tensor_name(static_cast<int>(v), what);
        const SafetensorsHeader::Entry* e = header.find(name);
        TS_CHECK(e != nullptr, "load_sharded_checkpoint: '", path, "' has no tensor '", name,
                 "', which the index '", index_file_name(index.dir), "' lists");
        TS_CHECK(e->shape == Shape{index.files[r][v].size()} && is_floating(e->dtype),
                 "load_sharded_checkpoint: '", path, "': '", name, "' is ", e->dtype, " ",
                 e->shape, " but the index says this file holds elements [",
                 index.files[r][v].begin, ", ", index.files[r][v].end, ") of vector ", v,
                 " (", index.files[r][v].size(), " floating-point elements)");
      }
    }
    if (index.hashed) {
      // The index vouches for the header, and the header for each tensor's bytes.
      char crcs[64];
      std::snprintf(crcs, sizeof(crcs), "%08x, the index's %08x", header.header_crc32,
                    index.file_crc32[r]);
      TS_CHECK(header.hashed && header.header_crc32 == index.file_crc32[r],
               "load_sharded_checkpoint: '", path, "': its header is not the one the index '",
               index_file_name(index.dir), "' recorded (crc32 ", header.hashed ? crcs : "none",
               "): the file is corrupt or was replaced");
    }
    headers_.push_back(std::move(header));
  }
  verified_.resize(headers_.size());
}

void ShardReader::verify_once(int r, const std::string& tensor) const {
  if (verified_[r].count(tensor) != 0) return;
  verify_safetensors_tensor(shard_file_name(index_.dir, r, index_.world_size()), headers_[r], tensor);
  verified_[r].insert(tensor);
}

void ShardReader::verify_all() const {
  for (size_t r = 0; r < headers_.size(); ++r) {
    for (const SafetensorsHeader::Entry& e : headers_[r].entries) verify_once(static_cast<int>(r), e.name);
  }
}

ShardReader::ShardReader(const CheckpointIndex& index, StateDict in_memory)
    : index_(index), in_memory_(std::move(in_memory)) {}

void ShardReader::read(const std::string& name, const std::string& what, const Range& part,
                       Tensor out) const {
  const IndexParam* p = index_.find(name);
  TS_CHECK(p != nullptr, "load_sharded_checkpoint: '", index_.dir, "' has no parameter '", name,
           "'");
  const Range wanted{p->offset + part.begin, p->offset + part.end};
  for (int r = 0; r < index_.world_size(); ++r) {
    const Range held = index_.files[r][p->vector];
    const Range both = intersect(wanted, held);
    if (both.empty()) continue;
    const std::string tensor = shard_tensor_name(p->vector, what);
    Tensor values;
    if (headers_.empty()) {
      values = in_memory_.at(tensor).reshape({-1}).narrow(0, both.begin - held.begin, both.size());
    } else {
      verify_once(r, tensor);
      values = read_safetensors_elements(shard_file_name(index_.dir, r, index_.world_size()),
                                         headers_[r], tensor, both.begin - held.begin, both.size());
    }
    out.narrow(0, both.begin - wanted.begin, both.size()).copy_(values);
  }
}

}  // namespace zero
}  // namespace dist
}  // namespace tessera
