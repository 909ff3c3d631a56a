#include "dist/zero/offload/optimizer_swapper.h"

#include <algorithm>

#include "autograd/grad_mode.h"
#include "optim/state_keys.h"
#include "tensor/accelerator.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {
namespace offload {

namespace {

// The options entries of a state dict ("param_groups.G.NAME").
StateDict param_group_entries(const optim::Optimizer& optimizer) {
  StateDict out;
  for (const auto& [key, t] : optimizer.state_dict()) {
    if (key.rfind("param_groups.", 0) == 0) out.set(key, t);
  }
  return out;
}

}  // namespace

OptimizerSwapper::OptimizerSwapper(std::unique_ptr<optim::Optimizer> inner,
                                   std::vector<Variable> windows, std::vector<SwapPiece> pieces,
                                   DType dtype, Device device, const Offload& options,
                                   const char* who)
    : inner_(std::move(inner)), windows_(std::move(windows)), pieces_(std::move(pieces)),
      dtype_(dtype), device_(device), who_(who) {
  NoGradGuard no_grad;
  TS_CHECK(inner_ != nullptr && inner_->param_groups().size() == windows_.size(), who_,
           ": the offloaded optimizer needs one window per parameter group");
  // Which state each group keeps: one step of the inner optimizer on one-element windows, then
  // forgotten (its options stay).
  const StateDict groups = param_group_entries(*inner_);
  for (Variable& w : windows_) {
    w.set_data(zeros({1}, TensorOptions(dtype_).device(device_)));
    w.set_grad(zeros({1}, TensorOptions(dtype_).device(device_)));
  }
  inner_->step();
  const StateDict probe = inner_->state_dict();
  names_.resize(windows_.size());
  for (size_t g = 0; g < windows_.size(); ++g) {
    for (const auto& [name, t] : probe.with_prefix_removed(optim::state_key_prefix(g))) {
      if (name != "step") names_[g].push_back(name);
    }
    windows_[g].set_grad(Tensor());
  }
  inner_->load_state_dict(groups);

  int64_t largest = 0;
  size_t most_names = 0;
  for (const SwapPiece& p : pieces_) {
    TS_CHECK(p.group < windows_.size() && p.numel > 0, who_, ": piece of group ", p.group,
             " and ", p.numel, " elements");
    largest = std::max(largest, p.numel);
    most_names = std::max(most_names, names_[p.group].size());
  }
  store_ = make_store(options, options.optimizer(), who, "optimizer_state", device_.is_cuda());
  const int64_t element = static_cast<int64_t>(element_size(dtype_));
  for (const SwapPiece& p : pieces_) {
    std::vector<Segment> segments;
    for (size_t i = 0; i < names_[p.group].size(); ++i) segments.push_back(store_->reserve(p.numel * element));
    segments_.push_back(std::move(segments));
  }
  store_->commit();
  steps_.assign(pieces_.size(), 0);
  // Page-locked staging on a GPU, so the copies to and from the device run asynchronously.
  const bool pinned = device_.is_cuda();
  for (Slot* slot : {&reads_[0], &reads_[1], &writes_[0], &writes_[1]}) {
    for (size_t i = 0; i < most_names; ++i) slot->buffers.emplace_back(largest * element, pinned);
  }
}

OptimizerSwapper::~OptimizerSwapper() {
  // The store must not be destroyed under transfers that read or write the slots.
  for (Slot* slot : {&reads_[0], &reads_[1], &writes_[0], &writes_[1]}) {
    for (const IoRequest& r : slot->requests) {
      try {
        r.wait();
      } catch (const std::exception&) {
        // Destruction (perhaps while unwinding from that very error): nothing left to report to.
      }
    }
  }
}

size_t OptimizerSwapper::name_index(size_t group, const std::string& name) const {
  const std::vector<std::string>& names = names_[group];
  const auto it = std::find(names.begin(), names.end(), name);
  TS_CHECK(it != names.end(), who_, ": the optimizer keeps no state '", name, "' for group ", group,
           " (it keeps ", names, ")");
  return static_cast<size_t>(it - names.begin());
}

void OptimizerSwapper::wait(Slot& slot) {
  std::vector<IoRequest> requests = std::move(slot.requests);
  slot.requests.clear();
  for (const IoRequest& r : requests) r.wait();
}

void OptimizerSwapper::drain() {
  for (Slot* slot : {&reads_[0], &reads_[1], &writes_[0], &writes_[1]}) wait(*slot);
}

void OptimizerSwapper::post_read(size_t k, Slot& slot) {
  if (steps_[k] == 0) return;  // never stepped: the optimizer makes its state fresh
  for (size_t i = 0; i < segments_[k].size(); ++i) {
    slot.requests.push_back(store_->read(segments_[k][i], slot.buffers[i]));
  }
}

void OptimizerSwapper::step(const std::function<Tensor(size_t)>& data,
                            const std::function<Tensor(size_t)>& grad,
                            const std::function<bool(size_t)>& has_grad) {
  NoGradGuard no_grad;
  drain();  // the last step's write-behind, before any of it is read again
  std::vector<size_t> active;
  for (size_t k = 0; k < pieces_.size(); ++k) {
    if (has_grad(k)) active.push_back(k);
  }
  const int64_t read_before = store_->bytes_read(), written_before = store_->bytes_written();
  last_step_read_ = last_step_written_ = 0;
  if (active.empty()) return;
  const StateDict options = param_group_entries(*inner_);
  post_read(active[0], reads_[0]);
  for (size_t a = 0; a < active.size(); ++a) {
    const size_t k = active[a];
    const size_t g = pieces_[k].group;
    Slot& in = reads_[a % 2];
    wait(in);
    // Prefetch: the next piece's state comes in while this one steps.
    if (a + 1 < active.size()) post_read(active[a + 1], reads_[(a + 1) % 2]);

    for (Variable& w : windows_) w.set_grad(Tensor());
    windows_[g].set_data(data(k));
    windows_[g].set_grad(grad(k));
    StateDict state = options;
    if (steps_[k] > 0) {
      state.set(optim::state_key(static_cast<int64_t>(g), "step"),
                scalar_tensor(static_cast<double>(steps_[k]), kI64));
      for (size_t i = 0; i < names_[g].size(); ++i) {
        state.set(optim::state_key(static_cast<int64_t>(g), names_[g][i]),
                  in.buffers[i].view(dtype_, pieces_[k].numel));
      }
    }
    inner_->load_state_dict(state);  // copies the piece's state in (onto the device)
    inner_->step();
    ++steps_[k];

    // Write-behind: the slot's previous write (piece a-2) must be done before it is refilled.
    Slot& out = writes_[a % 2];
    wait(out);
    const StateDict stepped = inner_->state_dict();
    for (size_t i = 0; i < names_[g].size(); ++i) {
      const Tensor& t = stepped.at(optim::state_key(static_cast<int64_t>(g), names_[g][i]));
      out.buffers[i].view(dtype_, pieces_[k].numel).copy_(t.reshape({-1}));
      out.requests.push_back(store_->write(segments_[k][i], out.buffers[i]));
    }
  }
  last_step_read_ = store_->bytes_read() - read_before;
  last_step_written_ = store_->bytes_written() - written_before;
  // Nothing stays in memory between steps: the windows would keep the last piece's data and
  // gradient alive, the inner optimizer its state.
  for (Variable& w : windows_) {
    w.set_grad(Tensor());
    w.set_data(zeros({1}, TensorOptions(dtype_).device(device_)));
  }
  inner_->load_state_dict(options);
}

Tensor OptimizerSwapper::read_state(size_t k, const std::string& name) {
  const size_t i = name_index(pieces_[k].group, name);
  drain();
  reads_[0].requests.push_back(store_->read(segments_[k][i], reads_[0].buffers[i]));
  wait(reads_[0]);
  return reads_[0].buffers[i].view(dtype_, pieces_[k].numel).to(device_).clone();
}

void OptimizerSwapper::write_state(size_t k, const std::string& name, const Tensor& values) {
  const size_t i = name_index(pieces_[k].group, name);
  TS_CHECK(values.numel() == pieces_[k].numel, who_, ": state '", name, "' of piece ", k, " has ",
           values.numel(), " elements, the piece ", pieces_[k].numel);
  drain();
  writes_[0].buffers[i].view(dtype_, pieces_[k].numel).copy_(values.reshape({-1}).to(dtype_));
  writes_[0].requests.push_back(store_->write(segments_[k][i], writes_[0].buffers[i]));
  wait(writes_[0]);
}

}  // namespace offload
}  // namespace dist
}  // namespace tessera
