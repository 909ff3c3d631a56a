// OptimizerSwapper: an element-wise optimizer whose state lives in an offload store (host memory
// or disk) and is streamed through memory piece by piece at each step, as ZeRO-Infinity swaps
// its optimizer state in sub-groups from NVMe (DeepSpeed's PipelinedOptimizerSwapper).
//
// The shard's elements are cut into pieces of at most Offload::piece_numel() elements (each of
// one parameter group). Every piece's state tensors (Adam: exp_avg, exp_avg_sq) have a segment
// in the store. A step runs the pieces in order with two staging slots per direction:
//
//   store    read 0 | read 1      | read 2      | read 3  ...          (I/O threads)
//   compute         | step 0      | step 1      | step 2  ...          (this thread)
//   store           |    write 0  |    write 1  |    write 2 ...       (I/O threads)
//
// the read of piece k+1 is posted before piece k steps, and piece k's write-back is posted after
// it, waited only when its slot comes round again (or before the next step reads the state):
// the resident state is a few pieces, not the shard, and the transfers run behind the compute.
// Between steps none of it is resident (the inner optimizer's state_bytes() is 0).
//
// Stepping a piece is the ordinary optimizer's own step on it: the inner optimizer (made by the
// caller's factory, one window Variable per parameter group) is handed the piece's data and
// gradient as its window's, and the piece's state and step count through load_state_dict;
// after its step, state_dict() gives the updated state to write back. SGD, Adam and AdamW update
// every element on its own, so the pieces' results are exactly those of the whole shard stepped
// in memory: an offloaded run equals the in-memory run bit for bit.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "autograd/variable.h"
#include "dist/zero/offload/offload.h"
#include "dist/zero/offload/store.h"
#include "optim/optimizer.h"

namespace tessera {
namespace dist {
namespace offload {

// One piece: its parameter group and its number of elements.
struct SwapPiece {
  size_t group = 0;
  int64_t numel = 0;
};

class OptimizerSwapper {
 public:
  // `inner` is the optimizer over `windows`, group g holding windows[g] alone. `dtype` and
  // `device`: the shard's. Reserves every piece's segments and commits the store (a full disk or
  // an unwritable directory is an error here, before training).
  OptimizerSwapper(std::unique_ptr<optim::Optimizer> inner, std::vector<Variable> windows,
                   std::vector<SwapPiece> pieces, DType dtype, Device device,
                   const Offload& options, const char* who);
  ~OptimizerSwapper();

  // Steps every piece k for which has_grad(k), in order, data(k) and grad(k) being its elements
  // of the shard and of its gradient (the inner optimizer's current options apply). data(k) and
  // grad(k) are asked for when piece k steps, so the caller may bring its shard in then.
  void step(const std::function<Tensor(size_t)>& data, const std::function<Tensor(size_t)>& grad,
            const std::function<bool(size_t)>& has_grad);

  optim::Optimizer& inner() { return *inner_; }
  const optim::Optimizer& inner() const { return *inner_; }
  const std::vector<SwapPiece>& pieces() const { return pieces_; }
  // The state a group's pieces keep ("exp_avg", "exp_avg_sq"; SGD without momentum: none).
  const std::vector<std::string>& state_names(size_t group) const { return names_[group]; }
  int64_t steps(size_t k) const { return steps_[k]; }

  // Checkpoints: piece k's state `name` read back (waits for the writes in flight), and written.
  Tensor read_state(size_t k, const std::string& name);
  void write_state(size_t k, const std::string& name, const Tensor& values);
  void set_steps(size_t k, int64_t steps) { steps_[k] = steps; }

  OffloadTier tier() const { return store_->tier(); }
  // Bytes of state held in the store, and the bytes moved so far.
  int64_t offloaded_bytes() const { return store_->reserved_bytes(); }
  int64_t bytes_read() const { return store_->bytes_read(); }
  int64_t bytes_written() const { return store_->bytes_written(); }
  // The bytes the last step() read and wrote (its write-behind included).
  int64_t last_step_read() const { return last_step_read_; }
  int64_t last_step_written() const { return last_step_written_; }
  const OffloadStore& store() const { return *store_; }

 private:
  struct Slot {
    std::vector<StagingBuffer> buffers;  // one per state name
    std::vector<IoRequest> requests;
  };
  size_t name_index(size_t group, const std::string& name) const;
  void post_read(size_t k, Slot& slot);
  static void wait(Slot& slot);
  void drain();

  std::unique_ptr<optim::Optimizer> inner_;
  std::vector<Variable> windows_;
  std::vector<SwapPiece> pieces_;
  DType dtype_;
  Device device_;
  std::string who_;
  std::vector<std::vector<std::string>> names_;  // per group
  std::unique_ptr<OffloadStore> store_;
  std::vector<std::vector<Segment>> segments_;  // per piece, per state name of its group
  std::vector<int64_t> steps_;                  // per piece
  int64_t last_step_read_ = 0, last_step_written_ = 0;
  Slot reads_[2];
  Slot writes_[2];
};

}  // namespace offload
}  // namespace dist
}  // namespace tessera
