// GroupedShardOptimizer with its state offloaded (host memory or disk): the pieces cut into
// swapped pieces of at most Offload::piece_numel() elements, stepped by an
// offload::OptimizerSwapper that streams their state through memory; the state dict is the
// in-memory one's, read from and written to the store.
#include <algorithm>

#include "autograd/grad_mode.h"
#include "dist/zero/grouped_shard_optimizer.h"
#include "dist/zero/offload/optimizer_swapper.h"
#include "dist/zero/offload/shard_home.h"
#include "optim/state_keys.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {
namespace zero {

namespace {
const char* const kWho = "GroupedShardOptimizer (offloaded)";
}  // namespace

void GroupedShardOptimizer::build_swapper(std::vector<optim::ParamGroup> pieces,
                                          const GroupedOptimizerFactory& make_optimizer,
                                          const Offload& offload) {
  offload.validate(kWho);
  const Tensor& first = shards_[0].shard.data();
  // The inner optimizer steps one window per group, each swapped piece in turn.
  std::vector<Variable> windows;
  std::vector<optim::ParamGroup> window_groups;
  for (size_t g = 0; g < pieces.size(); ++g) {
    Variable w(zeros({1}, first.options()), true);
    w.set_name("offload_window.group" + std::to_string(g));
    windows.push_back(w);
    window_groups.emplace_back(std::vector<Variable>{w}, std::move(pieces[g].options));
  }
  std::unique_ptr<optim::Optimizer> inner = make_optimizer(std::move(window_groups));
  check_inner_optimizer(inner.get(), windows.size());
  for (size_t k = 0; k < pieces_.size(); ++k) {
    const Piece& p = pieces_[k];
    TS_CHECK(shards_[p.shard].shard.dtype() == first.dtype() &&
                 shards_[p.shard].shard.data().device() == first.device(),
             kWho, ": shard ", p.shard, " is ", shards_[p.shard].shard.dtype(), " on ",
             shards_[p.shard].shard.data().device(), ", shard 0 ", first.dtype(), " on ",
             first.device(), " (one store holds them all)");
    for (int64_t at = p.range.begin; at < p.range.end; at += offload.piece_numel()) {
      swapped_.push_back({k, {at, std::min(p.range.end, at + offload.piece_numel())}});
    }
  }
  // Stepped shard by shard in flat order, so that an offloaded shard (FlatShard::home) is
  // brought in once per step; each swapped piece's own state makes the order free.
  std::stable_sort(swapped_.begin(), swapped_.end(), [&](const SwappedPiece& a, const SwappedPiece& b) {
    const size_t sa = pieces_[a.piece].shard, sb = pieces_[b.piece].shard;
    return sa != sb ? sa < sb : a.range.begin < b.range.begin;
  });
  std::vector<offload::SwapPiece> swap_pieces;
  for (const SwappedPiece& w : swapped_) swap_pieces.push_back({pieces_[w.piece].group, w.range.size()});
  // The in-memory pieces' views would keep the shards' storage alive (ZeRO-1/2 release theirs
  // between steps); the swapped pieces are cut from the shards at each step instead.
  for (Piece& p : pieces_) p.view = Variable();
  swapper_ = std::make_unique<offload::OptimizerSwapper>(std::move(inner), std::move(windows),
                                                         std::move(swap_pieces), first.dtype(),
                                                         first.device(), offload, kWho);
}

void GroupedShardOptimizer::step_offloaded() {
  const auto shard_of = [this](size_t k) -> const Variable& {
    return shards_[pieces_[swapped_[k].piece].shard].shard;
  };
  // The offloaded shard in memory now (the pieces come shard by shard): written back when the
  // pieces move on to the next shard, and after the last.
  int resident = -1;
  const auto put_back = [&] {
    if (resident >= 0) shards_[resident].home->put_back(shards_[resident].shard, /*values_changed=*/true);
    resident = -1;
  };
  const auto bring_in = [&](size_t k) {
    const size_t s = pieces_[swapped_[k].piece].shard;
    if (static_cast<int>(s) == resident) return;
    put_back();
    if (!shards_[s].offloaded()) return;
    shards_[s].home->bring_in(shards_[s].shard);
    resident = static_cast<int>(s);
    // The next offloaded shard is read while this one steps.
    for (size_t t = s + 1; t < shards_.size(); ++t) {
      if (!shards_[t].offloaded()) continue;
      shards_[t].home->prefetch(/*gradient=*/true);
      break;
    }
  };
  swapper_->step(
      [&](size_t k) {
        bring_in(k);
        const Range& r = swapped_[k].range;
        return shard_of(k).data().narrow(0, r.begin, r.size());
      },
      [&](size_t k) {
        const Range& r = swapped_[k].range;
        bring_in(k);
        const Tensor& grad = shard_of(k).grad();
        return grad.defined() ? grad.narrow(0, r.begin, r.size()) : Tensor();
      },
      [&](size_t k) {
        const FlatShard& f = shards_[pieces_[swapped_[k].piece].shard];
        return f.offloaded() && f.home->gradients_offloaded() ? f.home->has_gradient()
                                                              : f.shard.grad().defined();
      });
  put_back();
}

StateDict GroupedShardOptimizer::offloaded_state_dict() const {
  StateDict out;
  save_param_groups(out);
  // Every swapped piece steps with the others (every shard has a gradient at every ZeRO step).
  int64_t step = 0;
  std::vector<std::string> names;
  for (size_t k = 0; k < swapped_.size(); ++k) {
    const int64_t own = swapper_->steps(k);
    TS_CHECK(step == 0 || own == step, kWho, ": swapped piece ", k, " has stepped ", own,
             " times, the others ", step, ": step() after every shard has its gradient");
    step = std::max(step, own);
    for (const std::string& name : swapper_->state_names(pieces_[swapped_[k].piece].group)) {
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
  }
  if (step == 0) return out;
  auto& swapper = const_cast<offload::OptimizerSwapper&>(*swapper_);  // reads wait for writes
  for (size_t s = 0; s < shards_.size(); ++s) {
    const Tensor& shard = shards_[s].shard.data();  // empty when offloaded: its options only
    out.set(optim::state_key(static_cast<int64_t>(s), "step"),
            scalar_tensor(static_cast<double>(step), kI64));
    for (const std::string& name : names) {
      Tensor flat = zeros({shards_[s].numel()}, shard.options());
      for (size_t k = 0; k < swapped_.size(); ++k) {
        const Piece& p = pieces_[swapped_[k].piece];
        const std::vector<std::string>& own = swapper_->state_names(p.group);
        if (p.shard != s || std::find(own.begin(), own.end(), name) == own.end()) continue;
        TS_CHECK(swapper_->steps(k) == step, kWho, ": swapped piece ", k, " has stepped ",
                 swapper_->steps(k), " times, the others ", step);
        const Range& r = swapped_[k].range;
        flat.narrow(0, r.begin, r.size()).copy_(swapper.read_state(k, name));
      }
      out.set(optim::state_key(static_cast<int64_t>(s), name), flat);
    }
  }
  return out;
}

void GroupedShardOptimizer::load_offloaded_state_dict(const StateDict& state) {
  NoGradGuard no_grad;
  // Everything is checked before the store changes.
  for (const auto& [key, t] : state) check_state_key(key);
  std::vector<int64_t> steps(swapped_.size(), 0);
  for (size_t k = 0; k < swapped_.size(); ++k) {
    const Piece& p = pieces_[swapped_[k].piece];
    const std::string prefix = optim::state_key_prefix(static_cast<int64_t>(p.shard));
    const int64_t shard_numel = shards_[p.shard].numel();
    const Tensor* step = state.find(prefix + "step");
    const std::vector<std::string>& own = swapper_->state_names(p.group);
    for (const auto& [name, t] : state.with_prefix_removed(prefix)) {
      if (name == "step") continue;
      TS_CHECK(step != nullptr, kWho, "::load_state_dict: '", prefix, name, "' is present but '",
               prefix, "step' is not");
      TS_CHECK(std::find(own.begin(), own.end(), name) != own.end(), kWho, "::load_state_dict: '",
               prefix, name, "' is state this optimizer does not keep (it keeps ", own, ")");
      TS_CHECK(t.numel() == shard_numel, kWho, "::load_state_dict: '", prefix, name, "' has ",
               t.numel(), " elements for shard ", p.shard, " of ", shard_numel);
    }
    if (step == nullptr) continue;
    TS_CHECK(!is_floating(step->dtype()) && step->numel() == 1 && step->item() >= 0, kWho,
             "::load_state_dict: '", prefix, "step' is a ", step->dtype(), " tensor of shape ",
             step->shape(), ", expected a one-element step count >= 0");
    steps[k] = static_cast<int64_t>(step->item());
    for (const std::string& name : own) {
      TS_CHECK(steps[k] == 0 || state.contains(prefix + name), kWho, "::load_state_dict: '",
               prefix, "step' is present but '", prefix, name, "' is not");
    }
  }
  StateDict options;
  for (const auto& [key, t] : state) {
    if (key.rfind("param_groups.", 0) == 0) options.set(key, t);
  }
  stepper().load_state_dict(options);  // checks the options
  load_param_groups(state);
  for (size_t k = 0; k < swapped_.size(); ++k) {
    const Piece& p = pieces_[swapped_[k].piece];
    const std::string prefix = optim::state_key_prefix(static_cast<int64_t>(p.shard));
    swapper_->set_steps(k, steps[k]);
    if (steps[k] == 0) continue;
    const Range& r = swapped_[k].range;
    for (const std::string& name : swapper_->state_names(p.group)) {
      swapper_->write_state(k, name, state.at(prefix + name).reshape({-1}).narrow(0, r.begin, r.size()));
    }
  }
}

}  // namespace zero
}  // namespace dist
}  // namespace tessera
