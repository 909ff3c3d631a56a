#include "dist/zero/sharded_checkpoint.h"

#include <exception>
#include <filesystem>
#include <functional>
#include <memory>
#include <random>

#include "autograd/grad_mode.h"
#include "dist/reduce_scalar.h"
#include "dist/zero/checkpoint_index.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {
namespace zero {

namespace {

bool is_half(DType d) { return d == kF16 || d == kBF16; }
// The precision a parameter's values are saved and assembled in: its master's.
DType master_dtype(DType d) { return d == kF64 ? kF64 : kF32; }

// Runs `body` on every rank of `group` (just here when null). If it throws on any rank, it throws
// on every rank: the failing ranks their own error, the others one naming the first failing
// rank, so one rank's bad file ends the job instead of leaving the others at a collective.
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

// ---- Saving ------------------------------------------------------------------------------------

// One flat vector as this rank holds it.
struct SavedVector {
  IndexVector vector;
  std::vector<IndexParam> params;  // offsets within this vector
  std::vector<Range> files;        // every rank's part
  Tensor values;                   // this rank's part, master precision
  bool has_state = false;
  int64_t step = 0;
  std::vector<std::pair<std::string, Tensor>> state;  // key -> this rank's part
};

// Optimizer parameter `i`'s element-wise state ("state.I.NAME", the step apart), each cut to
// the first `count` elements (a stage-3 shard without its padding).
void take_state(const StateDict& state, int64_t i, int64_t count, SavedVector& out) {
  const std::string prefix = "state." + std::to_string(i) + ".";
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

int64_t random_id() {
  std::random_device device;
  std::mt19937_64 bits((static_cast<uint64_t>(device()) << 32) ^ device());
  return static_cast<int64_t>(bits() >> 1);
}

// Every rank writes its file, then rank 0 the index, so an index always describes files that
// are complete. Collective.
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
  on_every_rank(&group, "save_sharded_checkpoint", [&] {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    TS_CHECK(!ec, "save_sharded_checkpoint: cannot create directory '", dir, "': ", ec.message());
    save_safetensors(shard_file_name(dir, r, N), mine, metadata);
  });
  on_every_rank(&group, "save_sharded_checkpoint", [&] {
    if (r == 0) write_index(index);
  });
}

StateDict buffers_of(const nn::Module& model) {
  StateDict out;
  for (const auto& [name, b] : model.named_buffers()) out.set(name, b.data());
  return out;
}

// ---- Loading -----------------------------------------------------------------------------------

// A checkpoint opened for reading: its index and the reader of its files.
struct Source {
  CheckpointIndex index;
  std::unique_ptr<ShardReader> reader;
};

// A full checkpoint (dist/checkpoint.h) described as a sharded one written by one rank: one
// vector per parameter (`names`, the model's parameters in the optimizer's order), in memory.
std::unique_ptr<Source> open_full(const std::string& path, const std::vector<std::string>& names) {
  const Checkpoint c = read_checkpoint(path);
  auto source = std::make_unique<Source>();
  CheckpointIndex& index = source->index;
  index.dir = path;
  index.strategy = "full";
  index.has_optimizer = c.has_optimizer;
  index.progress = c.progress;
  index.extra = c.metadata;
  index.files.assign(1, {});
  StateDict memory;
  for (size_t i = 0; i < names.size(); ++i) {
    const Tensor* value = c.model.find(names[i]);
    TS_CHECK(value != nullptr, "load_sharded_checkpoint: '", path, "' has no 'model.", names[i],
             "'");
    const std::string prefix = "state." + std::to_string(i) + ".";
    const Tensor* master = c.optimizer.find(prefix + "master");
    const int v = static_cast<int>(i);
    index.vectors.push_back({names[i], value->numel(), value->numel()});
    index.params.push_back({names[i], value->shape(), value->dtype(), v, 0});
    index.files[0].push_back({0, value->numel()});
    memory.set(shard_tensor_name(v, "param"), master != nullptr ? *master : *value);
    std::vector<std::string> keys;
    for (const auto& [key, t] : c.optimizer.with_prefix_removed(prefix)) {
      if (key == "step") continue;
      if (key == "master") continue;  // it is the parameter's value, above
      keys.push_back(key);
      memory.set(shard_tensor_name(v, key), t);
    }
    const Tensor* step = c.optimizer.find(prefix + "step");
    if (i == 0) {
      index.has_state = step != nullptr;
      index.step = step != nullptr ? static_cast<int64_t>(step->item()) : 0;
      index.state_keys = keys;
    }
    TS_CHECK((step != nullptr) == index.has_state && keys == index.state_keys &&
                 (step == nullptr || static_cast<int64_t>(step->item()) == index.step),
             "load_sharded_checkpoint: '", path, "': the optimizer state of parameter ", i, " ('",
             names[i], "') differs in its step or keys (", keys, ") from parameter 0's (",
             index.state_keys, ")");
  }
  for (const auto& [name, t] : c.model) {
    if (index.find(name) == nullptr) index.buffers.set(name, t);
  }
  index.param_groups = c.optimizer;
  for (const auto& [name, t] : c.optimizer) {
    if (name.rfind("param_groups.", 0) != 0) index.param_groups.erase(name);
  }
  source->reader = std::make_unique<ShardReader>(index, std::move(memory));
  return source;
}

std::unique_ptr<Source> open_source(const std::string& path, const std::vector<std::string>& names) {
  if (!std::filesystem::is_directory(path)) return open_full(path, names);
  auto source = std::make_unique<Source>();
  source->index = read_index(path);
  source->reader = std::make_unique<ShardReader>(source->index);
  return source;
}

// What a run expects: its parameters' names, shapes and dtypes.
struct Expected {
  std::string name;
  Shape shape;
  DType dtype;
};

// The checkpoint holds exactly these parameters, with these shapes and dtypes.
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

// A parameter's place in the flat vector a run holds.
struct Placed {
  std::string name;
  int64_t offset = 0, numel = 0;
};

// Elements `range` of a flat vector laid out as `params`, read from the checkpoint: the values
// ("param") or a state key. Padding (beyond the last parameter) is zero.
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

// One parameter of an optimizer: the flat vector it stands for and its part of it.
struct OptimizerSlot {
  std::vector<Placed> params;
  Range range;
  Shape shape;            // the optimizer parameter's shape
  TensorOptions options;  // the state's dtype and device
  bool master = false;    // an f16/bf16 parameter: its master copy is state too
};

// The optimizer state dict of an optimizer whose parameter i is slots[i].
StateDict optimizer_state(const Source& source, const std::vector<OptimizerSlot>& slots) {
  const CheckpointIndex& index = source.index;
  TS_CHECK(index.has_optimizer, "load_sharded_checkpoint: '", index.dir,
           "' holds no optimizer state (saved without an optimizer)");
  StateDict state = index.param_groups;
  if (!index.has_state) return state;  // saved before the first step
  for (size_t i = 0; i < slots.size(); ++i) {
    const OptimizerSlot& s = slots[i];
    const std::string prefix = "state." + std::to_string(i) + ".";
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

// The model's parameters (whole) and buffers.
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

}  // namespace

// ---- ZeRO-1/2 ----------------------------------------------------------------------------------

void save_sharded_checkpoint(const std::string& dir, const nn::Module& model,
                             const ZeroRedundancyOptimizer& optimizer,
                             const TrainingProgress& progress, const Metadata& extra) {
  NoGradGuard no_grad;
  const char* who = "save_sharded_checkpoint";
  ProcessGroup& group = optimizer.group();
  const auto named = model.named_parameters();
  const std::vector<Range>& shards = optimizer.shards();
  const Range mine = shards[group.rank()];
  SavedVector s;
  s.vector = {"flat", optimizer.layout().total, optimizer.layout().total};
  s.files = shards;
  // The master shard for f16/bf16 parameters; the parameters' own values for the others.
  s.values = optimizer.master_shard();
  for (size_t i = 0; i < optimizer.params().size(); ++i) {
    const Variable& p = optimizer.params()[i];
    s.params.push_back({name_in(named, p, who), p.shape(), p.dtype(), 0,
                        optimizer.layout().ranges[i].begin});
  }
  take_state(optimizer.inner().state_dict(), 0, mine.size(), s);
  std::vector<SavedVector> vectors;
  vectors.push_back(std::move(s));
  write_sharded(dir, "zero" + std::to_string(optimizer.stage()), std::move(vectors), &optimizer,
                buffers_of(model), progress, extra, group);
}

TrainingProgress load_sharded_checkpoint(const std::string& source_path, nn::Module& model,
                                         optim::Optimizer* optimizer, Metadata* extra) {
  NoGradGuard no_grad;
  auto* zero = dynamic_cast<ZeroRedundancyOptimizer*>(optimizer);
  TrainingProgress progress;
  on_every_rank(zero != nullptr ? &zero->group() : nullptr, "load_sharded_checkpoint", [&] {
    const auto named = model.named_parameters();
    const auto source = open_source(source_path, names_of(named));
    std::vector<Expected> expected;
    for (const auto& [name, p] : named) expected.push_back({name, p.shape(), p.dtype()});
    check_layout(source->index, expected);
    load_model(*source, model);
    progress = source->index.progress;
    if (extra != nullptr) *extra = source->index.extra;
    if (optimizer == nullptr) return;
    const char* who = "load_sharded_checkpoint";
    if (zero == nullptr) {
      // An ordinary optimizer: one slot per parameter, whole.
      std::vector<OptimizerSlot> slots;
      for (const optim::ParamGroup& g : optimizer->param_groups()) {
        for (const Variable& p : g.params) {
          slots.push_back({{{name_in(named, p, who), 0, p.numel()}}, {0, p.numel()}, p.shape(),
                           TensorOptions(master_dtype(p.dtype())).device(p.data().device()),
                           is_half(p.dtype())});
        }
      }
      load_optimizer(*optimizer, optimizer_state(*source, slots), *source);
      return;
    }
    // ZeRO-1/2: this rank's shard of the flat vector.
    OptimizerSlot slot;
    for (size_t i = 0; i < zero->params().size(); ++i) {
      const Variable& p = zero->params()[i];
      slot.params.push_back({name_in(named, p, who), zero->layout().ranges[i].begin, p.numel()});
    }
    slot.range = zero->shards()[zero->group().rank()];
    slot.shape = {slot.range.size()};
    slot.options = TensorOptions(zero->shard().dtype()).device(zero->shard().data().device());
    // The master values of f16/bf16 parameters (the shard is their master from now on, so the
    // next step does not round it to the loaded parameters).
    zero->load_master_shard(assemble(*source->reader, slot.params, slot.range, "param", slot.options));
    StateDict state = optimizer_state(*source, {slot});
    // The outer optimizer takes the options; the inner one the shard's state.
    load_optimizer(*zero, source->index.param_groups, *source);
    load_optimizer(zero->inner(), state, *source);
  });
  return progress;
}

// ---- ZeRO-3 ------------------------------------------------------------------------------------

namespace {

// Unit u's parameters where the flat vector has them.
std::vector<Placed> placed_params(const FlatParameter& unit) {
  std::vector<Placed> placed;
  for (size_t j = 0; j < unit.params().size(); ++j) {
    placed.push_back({unit.params()[j].first, unit.layout().ranges[j].begin,
                      unit.layout().ranges[j].size()});
  }
  return placed;
}

Range shard_range(const FlatParameter& unit, int rank) {
  return {rank * unit.shard_numel(), (rank + 1) * unit.shard_numel()};
}

void check_fsdp_optimizer(FullyShardedDataParallel& fsdp, const optim::Optimizer& optimizer,
                          const char* who) {
  const std::vector<Variable> shards = fsdp.shard_parameters();
  std::vector<Variable> params;
  for (const optim::ParamGroup& g : optimizer.param_groups()) {
    params.insert(params.end(), g.params.begin(), g.params.end());
  }
  bool same = params.size() == shards.size();
  for (size_t i = 0; same && i < params.size(); ++i) same = params[i].is_same(shards[i]);
  TS_CHECK(same, who, ": the optimizer's ", params.size(),
           " parameters are not fsdp.shard_parameters() (", shards.size(),
           " unit shards) in that order");
}

}  // namespace

void save_sharded_checkpoint(const std::string& dir, FullyShardedDataParallel& fsdp,
                             const optim::Optimizer* optimizer, const TrainingProgress& progress,
                             const Metadata& extra) {
  NoGradGuard no_grad;
  const char* who = "save_sharded_checkpoint";
  if (optimizer != nullptr) check_fsdp_optimizer(fsdp, *optimizer, who);
  const StateDict state = optimizer != nullptr ? optimizer->state_dict() : StateDict();
  ProcessGroup& group = fsdp.group();
  const int N = group.size();
  std::vector<SavedVector> vectors;
  for (size_t u = 0; u < fsdp.units().size(); ++u) {
    const FlatParameter& unit = *fsdp.units()[u];
    SavedVector s;
    s.vector = {unit.name(), unit.numel(), unit.padded_numel()};
    // Each rank's shard without its padding (the last ranks' shards may be all padding).
    for (int q = 0; q < N; ++q) s.files.push_back(intersect(shard_range(unit, q), {0, unit.numel()}));
    const int64_t valid = s.files[group.rank()].size();
    s.values = unit.shard().data().narrow(0, 0, valid);
    for (size_t j = 0; j < unit.params().size(); ++j) {
      s.params.push_back({unit.params()[j].first, unit.shapes()[j], unit.dtype(), 0,
                          unit.layout().ranges[j].begin});
    }
    take_state(state, static_cast<int64_t>(u), valid, s);
    vectors.push_back(std::move(s));
  }
  write_sharded(dir, "zero3", std::move(vectors), optimizer, buffers_of(fsdp.module()), progress,
                extra, group);
}

TrainingProgress load_sharded_checkpoint(const std::string& source_path,
                                         FullyShardedDataParallel& fsdp,
                                         optim::Optimizer* optimizer, Metadata* extra) {
  NoGradGuard no_grad;
  const char* who = "load_sharded_checkpoint";
  TrainingProgress progress;
  on_every_rank(&fsdp.group(), who, [&] {
    if (optimizer != nullptr) check_fsdp_optimizer(fsdp, *optimizer, who);
    std::vector<Expected> expected;
    std::vector<std::string> names;
    for (const auto& unit : fsdp.units()) {
      TS_CHECK(!unit->gathered() && !unit->gathering(), who, ": unit '", unit->name(),
               "' is gathered; load between steps, not inside forward or backward");
      for (size_t j = 0; j < unit->params().size(); ++j) {
        expected.push_back({unit->params()[j].first, unit->shapes()[j], unit->dtype()});
      }
    }
    // A full checkpoint numbers its optimizer state in the model's parameter order.
    const auto source = open_source(source_path, names_of(fsdp.module().named_parameters()));
    check_layout(source->index, expected);
    const int r = fsdp.group().rank();
    std::vector<OptimizerSlot> slots;
    for (const auto& unit : fsdp.units()) {
      OptimizerSlot slot;
      slot.params = placed_params(*unit);
      slot.range = shard_range(*unit, r);
      slot.shape = {slot.range.size()};
      slot.options = TensorOptions(unit->shard().dtype()).device(unit->shard().data().device());
      Tensor(unit->shard().data())
          .copy_(assemble(*source->reader, slot.params, slot.range, "param", slot.options));
      slots.push_back(std::move(slot));
    }
    for (const auto& [name, b] : fsdp.module().named_buffers()) {
      const Tensor* saved = source->index.buffers.find(name);
      TS_CHECK(saved != nullptr && saved->shape() == b.shape(), who, ": '", source->index.dir,
               "' has no buffer '", name, "' of shape ", b.shape());
      Tensor(b.data()).copy_(*saved);
    }
    if (optimizer != nullptr) load_optimizer(*optimizer, optimizer_state(*source, slots), *source);
    progress = source->index.progress;
    if (extra != nullptr) *extra = source->index.extra;
  });
  return progress;
}

}  // namespace zero
}  // namespace dist
}  // namespace tessera
