// DDP communication hooks: what DDP does with a full gradient bucket.
//
// A hook starts the reduction of `bucket` (a flat tensor) across the group and returns its
// Work; when that Work is done the bucket must hold the *sum* over ranks (DDP divides by the
// world size afterwards). The default hook is a plain all-reduce; fp16_compress_hook halves the
// bytes on the wire by sending an f16 copy and converting the result back, as PyTorch's.
//
// A stateful hook (PyTorch's hook together with its state object: PowerSGD's warm-start
// matrices, error feedback's residuals) derives from CommunicationHook and sees the bucket as
// a GradBucket: the flat buffer, its index, and the per-parameter views with their shapes.
// Its state belongs to the hook object (state_dict/load_state_dict). dist/compression/ holds
// the compressors built on it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dist/process_group.h"
#include "tensor/state_dict.h"

namespace tessera {
namespace dist {

using CommHook = std::function<std::shared_ptr<Work>(ProcessGroup& group, const Tensor& bucket)>;

std::shared_ptr<Work> allreduce_hook(ProcessGroup& group, const Tensor& bucket);
std::shared_ptr<Work> fp16_compress_hook(ProcessGroup& group, const Tensor& bucket);

// One DDP gradient bucket as a hook sees it (PyTorch's GradBucket).
struct GradBucket {
  size_t index = 0;                // the bucket's place in DDP's order, the same on every rank
  Tensor buffer;                   // flat, contiguous: this rank's gradients in, the sum out
  std::vector<Tensor> gradients;   // views of `buffer`, one per parameter, in its shape
  std::vector<size_t> parameters;  // their indices in DistributedDataParallel::parameters_in_order()
};

class CommunicationHook {
 public:
  virtual ~CommunicationHook() = default;
  virtual std::string name() const = 0;
  // Starts reducing bucket.buffer across `group`; when the returned Work is done, the buffer
  // holds the sum over ranks (or what the compressor makes of it). Called in bucket order,
  // identically on every rank.
  virtual std::shared_ptr<Work> reduce(ProcessGroup& group, GradBucket& bucket) = 0;
  // The hook's state across steps (residuals, warm-start matrices, step counters).
  virtual StateDict state_dict() const { return StateDict(); }
  virtual void load_state_dict(const StateDict& state) { (void)state; }
};

// A stateless function hook as a CommunicationHook.
class FunctionHook : public CommunicationHook {
 public:
  FunctionHook(std::string name, CommHook hook) : name_(std::move(name)), hook_(std::move(hook)) {}
  std::string name() const override { return name_; }
  std::shared_ptr<Work> reduce(ProcessGroup& group, GradBucket& bucket) override {
    return hook_(group, bucket.buffer);
  }

 private:
  std::string name_;
  CommHook hook_;
};

}  // namespace dist
}  // namespace tessera
