// ZeRO-3's sharded checkpoints: one flat vector per unit, each rank its shard without the
// padding (sharded_checkpoint.h).
#include "dist/zero/sharded_checkpoint.h"
#include "dist/zero/fully_sharded_optimizer_state.h"

#include "autograd/grad_mode.h"
#include "dist/zero/sharded_checkpoint_parts.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {
namespace zero {

using namespace checkpoint_parts;  // the pieces both stages share

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

}  // namespace

void save_sharded_checkpoint(const std::string& dir, FullyShardedDataParallel& fsdp,
                             const optim::Optimizer* optimizer, const TrainingProgress& progress,
                             const Metadata& extra) {
  NoGradGuard no_grad;
  const char* who = "save_sharded_checkpoint";
  if (optimizer != nullptr) check_shard_optimizer(fsdp, *optimizer, who);
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
    s.values = unit.shard_values().narrow(0, 0, valid);
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
    if (optimizer != nullptr) check_shard_optimizer(fsdp, *optimizer, who);
    std::vector<Expected> expected;
    std::vector<std::string> names;
    for (const auto& unit : fsdp.units()) {
      TS_CHECK(!unit->gathered() && !unit->gathering(), who, ": unit '", unit->name(),
               "' is gathered; load between steps, not inside forward or backward");
      for (size_t j = 0; j < unit->params().size(); ++j) {
        expected.push_back({unit->params()[j].first, unit->shapes()[j], unit->dtype()});
      }
    }
    // A full checkpoint numbers its optimizer state as the unsplit optimizer does (state_order).
    const auto named = fsdp.module().named_parameters();
    const auto source = open_source(
        source_path, optimizer != nullptr
                         ? names_in_state_order(named, state_order(fsdp, *optimizer), who)
                         : names_of(named));
    check_layout(source->index, expected);
    const int r = fsdp.group().rank();
    std::vector<OptimizerSlot> slots;
    for (const auto& unit : fsdp.units()) {
      OptimizerSlot slot;
      slot.params = placed_params(*unit);
      slot.range = shard_range(*unit, r);
      slot.shape = {slot.range.size()};
      slot.options = TensorOptions(unit->shard().dtype()).device(unit->shard().data().device());
      unit->set_shard_values(assemble(*source->reader, slot.params, slot.range, "param", slot.options));
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
