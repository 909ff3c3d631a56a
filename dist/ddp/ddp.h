// DistributedDataParallel (Li et al., "PyTorch Distributed", VLDB 2020), natively.
//
// Construction: every rank checks it holds the same parameters as rank 0 and takes rank 0's
// values. Gradients are grouped into buckets in *reverse* registration order (backward produces
// them roughly last-layer first), the first bucket small (1 MB) so communication starts early,
// the rest up to bucket_cap_mb (25 MB):
//
//   parameters (registration order):  p0 p1 p2 p3 p4 p5
//   buckets:                          [p5 p4] [p3 p2 p1] [p0]    bucket 0 fills first
//
// During backward, each parameter's grad-ready hook copies its gradient into its bucket; the
// moment a bucket is full its all-reduce is launched (asynchronously, on the communication
// thread), while backward goes on computing earlier layers. Buckets are launched strictly in
// bucket order, so every rank issues the same collectives in the same order. The first hook of a
// backward queues a post-backward callback (autograd/engine.h); the engine runs it once the whole
// backward is done, and there DDP waits for the buckets, divides by the world size and writes
// the averages back to the parameters' grads: after backward() returns, every rank holds the
// gradient of the mean loss over the global batch, and the optimizer steps identically
// everywhere. (A parameter that got no gradient leaves its bucket unlaunched; the next forward
// names it, unless find_unused_parameters marked it ready at the forward.)
//
// no_sync() skips communication so gradients accumulate locally (gradient accumulation);
// find_unused_parameters marks parameters the forward did not reach as ready at once;
// gradient_as_bucket_view makes each grad a view into its bucket (no copies, less memory);
// broadcast_buffers copies rank 0's buffers (BatchNorm statistics) at every forward;
// a communication hook replaces the all-reduce (fp16 compression is built in).
//
// While a trace records (dist/trace_recorder.h), DDP adds to the compute track the forward,
// the backward of each layer (from the previous layer's last gradient, or the output's gradient,
// to its own last gradient: what the grad-ready hooks can see), each bucket's launch and the
// wait for the buckets at the end; the communication thread records each bucket's all-reduce
// ("all_reduce bucket B", args bucket and elements).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dist/ddp/comm_hooks.h"
#include "dist/grad_reduction_claim.h"
#include "dist/process_group.h"
#include "nn/module.h"

namespace tessera {
namespace dist {

class DDPOptions {
 public:
  DDPOptions& bucket_cap_mb(double mb) { bucket_cap_mb_ = mb; return *this; }
  DDPOptions& first_bucket_mb(double mb) { first_bucket_mb_ = mb; return *this; }
  DDPOptions& broadcast_buffers(bool b) { broadcast_buffers_ = b; return *this; }
  DDPOptions& find_unused_parameters(bool f) { find_unused_parameters_ = f; return *this; }
  DDPOptions& gradient_as_bucket_view(bool g) { gradient_as_bucket_view_ = g; return *this; }
  // Gradient buckets of CUDA parameters all-reduce over the device's group (NCCL in a CUDA
  // build; dist/device_groups.h) with the given group's ranks. false keeps the given group for
  // them too (MPI with CUDA tensors staged through the host: several ranks sharing one GPU).
  DDPOptions& use_device_group(bool u) { use_device_group_ = u; return *this; }
  double bucket_cap_mb() const { return bucket_cap_mb_; }
  double first_bucket_mb() const { return first_bucket_mb_; }
  bool broadcast_buffers() const { return broadcast_buffers_; }
  bool find_unused_parameters() const { return find_unused_parameters_; }
  bool gradient_as_bucket_view() const { return gradient_as_bucket_view_; }
  bool use_device_group() const { return use_device_group_; }

 private:
  double bucket_cap_mb_ = 25, first_bucket_mb_ = 1;
  bool broadcast_buffers_ = true, find_unused_parameters_ = false;
  bool gradient_as_bucket_view_ = false;
  bool use_device_group_ = true;
};

struct Bucket {
  std::vector<size_t> params;    // indices into DistributedDataParallel::parameters()
  std::vector<int64_t> offsets;  // where each starts in `buffer` (elements)
  int64_t numel = 0;
  DType dtype = kF32;
  Tensor buffer;  // flat, contiguous
};

// What happened during the last backward, in order, with steady-clock times in seconds (for
// tests, benchmarks and the teaching view).
struct DDPEvent {
  enum Kind { kGradReady, kLaunch, kWait } kind;
  size_t index;  // parameter index (kGradReady) or bucket index
  double time;
};

// How the last reduction overlapped with backward: per bucket, when its all-reduce ran on the
// communication thread; and when backward delivered its last gradient and when the averaged
// gradients were in place. exposed = done - last_gradient is what communication added.
struct ReductionTiming {
  struct BucketTime {
    double launched = 0, started = 0, finished = 0;
  };
  std::vector<BucketTime> buckets;
  double last_gradient = 0, done = 0;
  double communication_seconds() const;  // sum of the buckets' all-reduce durations
  double exposed_seconds() const { return done - last_gradient; }
};

class DistributedDataParallel : public nn::Module {
 public:
  DistributedDataParallel(std::shared_ptr<nn::Module> module, std::shared_ptr<ProcessGroup> group,
                          const DDPOptions& options = DDPOptions());
  ~DistributedDataParallel() override;

  std::string type_name() const override { return "DistributedDataParallel"; }
  Variable forward(const Variable& x) override;

  const std::shared_ptr<nn::Module>& module() const { return module_; }
  const std::vector<Variable>& parameters_in_order() const { return params_; }
  const std::vector<Bucket>& buckets() const { return buckets_; }
  // The buckets as a communication hook sees them (views with the parameters' shapes).
  const std::vector<GradBucket>& grad_buckets() const { return grad_buckets_; }
  const std::vector<DDPEvent>& trace() const { return trace_; }
  const ReductionTiming& last_reduction() const { return timing_; }
  void register_comm_hook(CommHook hook);
  // A stateful hook (dist/compression/); its state stays with the object.
  void register_comm_hook(std::shared_ptr<CommunicationHook> hook);
  const CommunicationHook& comm_hook() const { return *hook_; }
  CommunicationHook& comm_hook() { return *hook_; }

  // While alive, backward accumulates gradients locally without communicating.
  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel& ddp);
    ~NoSync();
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    DistributedDataParallel& ddp_;
    bool previous_;
  };
  NoSync no_sync() { return NoSync(*this); }

 private:
  void build_buckets();
  void prepare_for_backward(const Variable& output);
  void on_grad_ready(size_t index);
  void mark_ready(size_t index);
  void launch_ready_buckets();
  void finish_reduction();
  void record_backward_layers() const;  // the trace's per-layer backward spans
  Tensor bucket_view(size_t index) const;

  std::shared_ptr<nn::Module> module_;
  std::shared_ptr<ProcessGroup> group_;  // the given group: set-up checks and broadcasts
  std::shared_ptr<ProcessGroup> comm_;   // the buckets' all-reduces (group_for_device)
  DDPOptions options_;
  GradReductionClaim claim_;  // no ZeRO optimizer reduces these gradients too
  std::shared_ptr<CommunicationHook> hook_ =
      std::make_shared<FunctionHook>("allreduce", allreduce_hook);
  std::vector<GradBucket> grad_buckets_;  // what the hook sees of each bucket
  std::vector<Variable> params_;
  std::vector<int> hook_handles_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_, slot_of_;  // parameter -> (bucket, position)
  std::vector<std::string> layer_of_;        // parameter -> its module's name ("fc1")

  // Per-iteration state.
  bool expecting_ = false;  // a forward prepared a reduction that has not finished
  bool no_sync_ = false;
  bool finish_queued_ = false;  // this backward's post-backward callback is queued
  std::vector<bool> param_ready_;
  std::vector<int64_t> bucket_pending_;
  std::vector<std::shared_ptr<Work>> bucket_work_;
  size_t next_launch_ = 0, ready_count_ = 0;
  std::vector<DDPEvent> trace_;
  ReductionTiming timing_;
  double backward_start_ = 0;  // when the output's gradient arrived (while tracing)
};

}  // namespace dist
}  // namespace tessera
