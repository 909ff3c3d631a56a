// ZeRO-1/2's sharded checkpoints (sharded_checkpoint.h): one flat vector, cut as the
// optimizer's shards are; and loading any sharded or full checkpoint into a replicated model
// with a ZeroRedundancyOptimizer or an ordinary one. ZeRO-3: sharded_checkpoint_fsdp.cc.
#include "dist/zero/sharded_checkpoint.h"

#include <filesystem>

#include "autograd/grad_mode.h"
#include "dist/zero/sharded_checkpoint_parts.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {
namespace zero {

using namespace checkpoint_parts;  // the pieces both stages share

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
    // A full checkpoint numbers its optimizer state as the optimizer numbers it (its groups'
    // order; ZeRO's consolidated state the same).
    const char* who = "load_sharded_checkpoint";
    const auto source = open_source(
        source_path, optimizer != nullptr ? names_in_state_order(named, optimizer->parameters(), who)
                                          : names_of(named));
    std::vector<Expected> expected;
    for (const auto& [name, p] : named) expected.push_back({name, p.shape(), p.dtype()});
    check_layout(source->index, expected);
    load_model(*source, model);
    progress = source->index.progress;
    if (extra != nullptr) *extra = source->index.extra;
    if (optimizer == nullptr) return;
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

bool verify_checkpoint(const std::string& source) {
  if (!std::filesystem::is_directory(source)) return read_checkpoint(source).hashed;
  const CheckpointIndex index = read_index(source);
  ShardReader(index).verify_all();
  return index.hashed;
}

}  // namespace zero
}  // namespace dist
}  // namespace tessera
