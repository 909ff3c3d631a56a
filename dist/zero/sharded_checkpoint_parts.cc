#include "dist/zero/sharded_checkpoint_parts.h"

#include <algorithm>
#include <exception>
#include <filesystem>
#include <functional>
#include <memory>
#include <random>

#include "dist/reduce_scalar.h"
#include "dist/zero/sharded_checkpoint.h"
#include "optim/state_keys.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {
namespace zero {
namespace checkpoint_parts {

namespace {

StateDict param_groups_of(const optim::Optimizer& optimizer) {
  StateDict out;
  const auto& groups = optimizer.param_groups();
  for (size_t g = 0; g < groups.size(); ++g) {
    for (const auto& [name, value] : groups[g].options->values()) {
      out.set("param_groups." + std::to_string(g) + "." + name, scalar_tensor(value, kF64));
    }
  }
  return out;
}

SavePhaseHook& save_phase_hook() {
  static SavePhaseHook hook;
  return hook;
}

void save_phase(const std::string& phase) {
  if (save_phase_hook()) save_phase_hook()(phase);
}

int64_t random_id() {
  std::random_device device;
  std::mt19937_64 bits((static_cast<uint64_t>(device()) << 32) ^ device());
  return static_cast<int64_t>(bits() >> 1);
}

}  // namespace

}  // namespace checkpoint_parts

void set_save_phase_hook(SavePhaseHook hook) { checkpoint_parts::save_phase_hook() = std::move(hook); }

namespace checkpoint_parts {

void on_every_rank(ProcessGroup* group, const char* who, const std::function<void()>& body) {
  std::exception_ptr error;
  try {
    body();
  } catch (...) {
    error = std::current_exception();
  }
  if (group != nullptr) {
    const double first = all_reduce_scalar(error ? group->rank() : group->size(), *group,
                                           ReduceOp::kMin);
    if (!error) {
      TS_CHECK(first == group->size(), who, ": rank ", first,
               " failed (its error is printed by that rank); stopping on every rank");
    }
  }
  if (error) std::rethrow_exception(error);
}

std::string name_in(const std::vector<std::pair<std::string, Variable>>& named, const Variable& p,
                    const char* who) {
  for (const auto& [name, q] : named) {
    if (q.is_same(p)) return name;
  }
  TS_FAIL(who, ": the optimizer's parameter '", p.name(), "' (", p.shape(),
          ") is not a parameter of the model");
}

void take_state(const StateDict& state, int64_t i, int64_t count, SavedVector& out) {
  const std::string prefix = optim::state_key_prefix(i);
  const Tensor* step = state.find(prefix + "step");
  if (step == nullptr) return;
  out.has_state = true;
  out.step = static_cast<int64_t>(step->item());
  for (const auto& [name, t] : state.with_prefix_removed(prefix)) {
    if (name == "step") continue;
    TS_CHECK(name != "master", "save_sharded_checkpoint: optimizer parameter ", i,
             " has an f16/bf16 master copy; the sharded parameters are f32 masters already");
    out.state.emplace_back(name, t.reshape({-1}).narrow(0, 0, count));
  }
}

void write_sharded(const std::string& dir, const std::string& strategy,
                   std::vector<SavedVector> vectors, const optim::Optimizer* optimizer,
                   const StateDict& buffers, const TrainingProgress& progress,
                   const Metadata& extra, ProcessGroup& group) {
  const int N = group.size(), r = group.rank();
  CheckpointIndex index;
  index.dir = dir;
  index.strategy = strategy;
  index.progress = progress;
  index.extra = extra;
  index.buffers = buffers;
  index.has_optimizer = optimizer != nullptr;
  if (optimizer != nullptr) index.param_groups = param_groups_of(*optimizer);
  index.files.assign(N, {});
  StateDict mine;
  for (size_t v = 0; v < vectors.size(); ++v) {
    SavedVector& s = vectors[v];
    // The state is the same structure on every rank (all ranks step together), so this check
    // fails everywhere alike.
    std::vector<std::string> keys;
    for (const auto& [key, t] : s.state) keys.push_back(key);
    if (v == 0) {
      index.has_state = s.has_state;
      index.step = s.step;
      index.state_keys = keys;
    }
    TS_CHECK(s.has_state == index.has_state && s.step == index.step && keys == index.state_keys,
             "save_sharded_checkpoint: the optimizer state of '", s.vector.name, "' (step ",
             s.step, ", keys ", keys, ") differs from that of '", vectors[0].vector.name,
             "' (step ", index.step, ", keys ", index.state_keys,
             "): one step count and one set of state keys per checkpoint");
    index.vectors.push_back(s.vector);
    for (IndexParam p : s.params) {
      p.vector = static_cast<int>(v);
      index.params.push_back(p);
    }
    for (int q = 0; q < N; ++q) index.files[q].push_back(s.files[q]);
    mine.set(shard_tensor_name(static_cast<int>(v), "param"), s.values);
    for (const auto& [key, t] : s.state) mine.set(shard_tensor_name(static_cast<int>(v), key), t);
  }
  // One id per save, rank 0's, in every file: a reader recognises files of another save.
  Tensor id = from_vector(std::vector<int64_t>{r == 0 ? random_id() : 0}, {1});
  group.broadcast(id, 0)->wait();
  index.id = id.data<int64_t>()[0];
  const Metadata metadata{{"format", "tessera-sharded-checkpoint-shard-1"},
                          {"id", std::to_string(index.id)},
                          {"rank", std::to_string(r)},
                          {"world_size", std::to_string(N)}};
  // 1. Every rank its shard, on disk (the file and its directory entry flushed) before this
  // returns; on_every_rank's all-reduce is every rank's confirmation.
  uint32_t crc = 0;
  on_every_rank(&group, "save_sharded_checkpoint", [&] {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    TS_CHECK(!ec, "save_sharded_checkpoint: cannot create directory '", dir, "': ", ec.message());
    crc = save_safetensors(shard_file_name(dir, r, N), mine, metadata, ContentHashes::kWrite,
                           [] { save_phase("mid-shard"); });
  });
  // 2. The shards' header hashes, for the index (each rank fills its slot; crc32 < 2^32 is exact
  // in f64).
  Tensor crcs = zeros({N}, kF64);
  crcs.narrow(0, r, 1).fill_(static_cast<double>(crc));
  group.all_reduce(crcs, ReduceOp::kSum)->wait();
  for (int q = 0; q < N; ++q) index.file_crc32.push_back(static_cast<uint32_t>(crcs.data<double>()[q]));
  save_phase("before-index");
  // 3. Rank 0 commits: the index, written last. Until it is renamed into place, readers see the
  // previous checkpoint (tools/train writes each save into a directory of its own).
  on_every_rank(&group, "save_sharded_checkpoint", [&] {
    if (r == 0) write_index(index, [] { save_phase("mid-index"); });
  });
}

StateDict buffers_of(const nn::Module& model) {
  StateDict out;
  for (const auto& [name, b] : model.named_buffers()) out.set(name, b.data());
  return out;
}

std::unique_ptr<Source> open_source(const std::string& path, const std::vector<std::string>& names) {
  if (!std::filesystem::is_directory(path)) return open_full_checkpoint(path, names);
  auto source = std::make_unique<Source>();
  source->index = read_index(path);
  source->reader = std::make_unique<ShardReader>(source->index);
  return source;
}

void check_layout(const CheckpointIndex& index, const std::vector<Expected>& expected) {
  const std::string where = index.strategy == "full" ? index.dir : index_file_name(index.dir);
  for (const Expected& e : expected) {
    const IndexParam* p = index.find(e.name);
    TS_CHECK(p != nullptr, "load_sharded_checkpoint: '", where, "' has no parameter '", e.name,
             "' (", e.shape, ", ", e.dtype, "), which the model has");
    TS_CHECK(p->shape == e.shape && p->dtype == e.dtype, "load_sharded_checkpoint: '", where,
             "': parameter '", e.name, "' is ", p->dtype, " ", p->shape, " but the model's is ",
             e.dtype, " ", e.shape);
  }
  if (index.params.size() != expected.size()) {
    for (const IndexParam& p : index.params) {
      bool found = false;
      for (const Expected& e : expected) found = found || e.name == p.name;
      TS_CHECK(found, "load_sharded_checkpoint: '", where, "' holds parameter '", p.name, "' (",
               p.shape, ", ", p.dtype, "), which the model does not have");
    }
  }
}

Tensor assemble(const ShardReader& reader, const std::vector<Placed>& params, const Range& range,
                const std::string& what, const TensorOptions& options) {
  Tensor out = zeros({range.size()}, options);
  for (const Placed& p : params) {
    const Range part = intersect(range, {p.offset, p.offset + p.numel});
    if (part.empty()) continue;
    reader.read(p.name, what, {part.begin - p.offset, part.end - p.offset},
                out.narrow(0, part.begin - range.begin, part.size()));
  }
  return out;
}

StateDict optimizer_state(const Source& source, const std::vector<OptimizerSlot>& slots) {
  const CheckpointIndex& index = source.index;
  TS_CHECK(index.has_optimizer, "load_sharded_checkpoint: '", index.dir,
           "' holds no optimizer state (saved without an optimizer)");
  StateDict state = index.param_groups;
  if (!index.has_state) return state;  // saved before the first step
  for (size_t i = 0; i < slots.size(); ++i) {
    const OptimizerSlot& s = slots[i];
    const std::string prefix = optim::state_key_prefix(i);
    state.set(prefix + "step", scalar_tensor(static_cast<double>(index.step), kI64));
    for (const std::string& key : index.state_keys) {
      state.set(prefix + key, assemble(*source.reader, s.params, s.range, key, s.options).view(s.shape));
    }
    if (s.master) {
      state.set(prefix + "master",
                assemble(*source.reader, s.params, s.range, "param", s.options).view(s.shape));
    }
  }
  return state;
}

void load_optimizer(optim::Optimizer& optimizer, const StateDict& state, const Source& source) {
  try {
    optimizer.load_state_dict(state);
  } catch (const Error& e) {
    TS_FAIL("load_sharded_checkpoint: '", source.index.dir, "' (optimizer state): ", e.message());
  }
}

void load_model(const Source& source, nn::Module& model) {
  StateDict state;
  for (const auto& [name, p] : model.named_parameters()) {
    const Tensor values = assemble(*source.reader, {{name, 0, p.numel()}}, {0, p.numel()},
                                   "param", TensorOptions(master_dtype(p.dtype())));
    state.set(name, values.to(p.dtype()).view(p.shape()));
  }
  for (const auto& [name, b] : model.named_buffers()) {
    const Tensor* saved = source.index.buffers.find(name);
    TS_CHECK(saved != nullptr, "load_sharded_checkpoint: '", source.index.dir,
             "' has no buffer '", name, "' (", b.shape(), "), which the model has");
    state.set(name, *saved);
  }
  try {
    model.load_state_dict(state);
  } catch (const Error& e) {
    TS_FAIL("load_sharded_checkpoint: '", source.index.dir, "' (model): ", e.message());
  }
}

std::vector<std::string> names_of(const std::vector<std::pair<std::string, Variable>>& named) {
  std::vector<std::string> names;
  for (const auto& [name, p] : named) names.push_back(name);
  return names;
}

std::vector<std::string> names_in_state_order(
    const std::vector<std::pair<std::string, Variable>>& named,
    const std::vector<Variable>& numbered, const char* who) {
  std::vector<std::string> names;
  for (const Variable& p : numbered) names.push_back(name_in(named, p, who));
  for (const auto& [name, p] : named) {
    const bool listed = std::any_of(numbered.begin(), numbered.end(),
                                    [&](const Variable& q) { return q.is_same(p); });
    if (!listed) names.push_back(name);
  }
  return names;
}

}  // namespace checkpoint_parts
}  // namespace zero
}  // namespace dist
}  // namespace tessera
