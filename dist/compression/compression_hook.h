// CompressionHook: a DDP communication hook that runs a Compressor over every bucket.
//
//   bucket (f32, this rank's gradient)
//     │ compress (ctx: the bucket's reduction count, its index, this rank)
//     ▼
//   message ──┬─ all-reduce transport: all-reduce the messages (sum), decompress once
//             └─ all-gather transport: all-gather every rank's message, decompress each, add
//     ▼
//   bucket = sum over ranks of the approximations (DDP divides by N: the average)
//
// The compression runs on the thread that delivers the gradients (backward), the exchange on
// the communication thread, the decompression when DDP waits for the bucket. Each bucket keeps
// its own reduction count (state_dict: "step.B"), which seeds random choices; with error
// feedback the compressor is an ErrorFeedback wrapper and its residuals are state too.
//
// Steps that are not finite. With fp16 a bucket overflows now and then (inf/NaN gradients) and
// the GradScaler skips the step; the hook must then change no state, or inf - inf = NaN in a
// residual poisons every later step. Every rank must decide alike, and a rank whose own bucket
// is finite learns of a peer's inf only from the exchange. So:
//
//   own bucket not finite  ->  compress an all-NaN bucket instead: every rank's sum is NaN
//                              (whichever entries a sparsifier keeps, and no compressor sees a
//                              mix of NaN and numbers it might sort)
//   after the exchange     ->  the summed result, identical on every rank, decides: finite:
//                              the compressor keeps its new state and the bucket's count
//                              advances; not finite: the compressor undoes this compression
//                              (Compressor::settle) and the count stays, so the step leaves
//                              the state as if it never ran, on every rank
//
// (Per bucket: a step whose other buckets were finite still advances their state.)
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "dist/ddp/comm_hooks.h"
#include "dist/compression/compressor.h"

namespace tessera {
namespace dist {
namespace compression {

class CompressionHook : public CommunicationHook {
 public:
  explicit CompressionHook(std::unique_ptr<Compressor> compressor);
  std::string name() const override { return compressor_->name(); }
  std::shared_ptr<Work> reduce(ProcessGroup& group, GradBucket& bucket) override;
  StateDict state_dict() const override;
  void load_state_dict(const StateDict& state) override;
  const Compressor& compressor() const { return *compressor_; }

 private:
  struct Steps {
    std::mutex mutex;                 // read by reduce(), advanced when a bucket's Work is waited
    std::map<size_t, int64_t> count;  // per bucket: finite reductions so far
  };
  std::shared_ptr<Compressor> compressor_;  // shared with the decompression continuations
  std::shared_ptr<Steps> steps_ = std::make_shared<Steps>();  // shared with them too
};

}  // namespace compression
}  // namespace dist
}  // namespace tessera
