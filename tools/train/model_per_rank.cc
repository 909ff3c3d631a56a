#include "tools/train/model_per_rank.h"

#include <cstdio>
#include <string>

#include "autograd/grad_mode.h"
#include "dist/state_dict_gather.h"

namespace tessera {
namespace train {

namespace {

std::string rank_prefix(size_t rank) { return "rank." + std::to_string(rank) + "."; }

}  // namespace

StateDict ModelPerRank::extra_state() {
  StateDict mine;
  for (const auto& [name, t] : averaged_.own_state(*model_)) mine.set("model." + name, t);
  for (const auto& [key, t] : own_optimizer().state_dict()) mine.set("optimizer." + key, t);
  // Every rank's, on every rank (rank 0 saves them): N models in memory for the moment.
  const std::vector<StateDict> all = dist::all_gather_state_dicts(mine, *world_);
  StateDict out;
  for (size_t r = 0; r < all.size(); ++r) {
    for (const auto& [key, t] : all[r]) out.set(rank_prefix(r) + key, t);
  }
  return out;
}

void ModelPerRank::load_extra_state(const Checkpoint& checkpoint, bool lead) {
  int saved = 0;
  while (!checkpoint.extra.with_prefix_removed(rank_prefix(saved) + "model.").empty()) ++saved;
  if (saved != world_->size()) {
    // A checkpoint of ranks holding one model (DDP, ...) has no per-rank state to miss.
    if (lead && saved > 0) {
      std::printf("%s: every rank's own model and optimizer state start from the checkpoint's "
                  "average model and rank 0's optimizer state (it holds each rank's own for %d "
                  "ranks, this run has %d)\n",
                  checkpoint.path.c_str(), saved, world_->size());
    }
    return;
  }
  const StateDict own = checkpoint.extra.with_prefix_removed(rank_prefix(world_->rank()));
  NoGradGuard no_grad;
  model_->load_state_dict(own.with_prefix_removed("model."));
  own_optimizer().load_state_dict(own.with_prefix_removed("optimizer."));
}

}  // namespace train
}  // namespace tessera
