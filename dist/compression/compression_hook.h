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
#pragma once

#include <map>
#include <memory>
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
  std::shared_ptr<Compressor> compressor_;  // shared with the decompression continuations
  std::map<size_t, int64_t> steps_;         // per bucket: reductions so far
};

}  // namespace compression
}  // namespace dist
}  // namespace tessera
