// SwappedVector: one flat vector that lives in an offload store between uses and is brought
// into memory whole when needed: ZeRO-1/2's f32 master shard of f16/bf16 parameters, which the
// step needs whole (it is all-gathered into the parameters) and nothing needs between steps.
//
//   step():  read() ──> the shard in memory ──> step, all-gather ──> write() ──> released
//            (pieces of Offload::piece_numel() elements, all in flight on the I/O pool)
//
// So between steps, where forward and backward keep their activations, the master costs no
// memory; during the step it costs what it would anyway.
#pragma once

#include <memory>
#include <vector>

#include "dist/zero/offload/offload.h"
#include "dist/zero/offload/store.h"
#include "tensor/tensor.h"

namespace tessera {
namespace dist {
namespace offload {

class SwappedVector {
 public:
  // `numel` elements of `dtype` on `device` (their home between reads and writes), in the store
  // of options.optimizer()'s tier; the store is committed here (errors before training).
  SwappedVector(int64_t numel, DType dtype, Device device, const Offload& options, const char* who);
  // The same in `store`, shared with other vectors (a ZeRO-3 wrapper's units: shard_home.h): only
  // reserves this vector's segments; the owner commits the store once all have reserved.
  SwappedVector(int64_t numel, DType dtype, Device device, int64_t piece_numel,
                std::shared_ptr<OffloadStore> store);

  // A transfer in flight: every piece posted to the store's I/O threads, into (or from) one
  // staging buffer that the transfer keeps alive. wait() returns once all pieces are done.
  class Transfer {
   public:
    Transfer() = default;
    bool pending() const { return !requests_.empty(); }
    // Waits, then releases the staging buffer (a read's values stay in what take() returns).
    void wait();
    const std::vector<IoRequest>& requests() const { return requests_; }
    // A read: waits, then the vector (a view of the staging buffer, or a copy on the device).
    Tensor take();

   private:
    friend class SwappedVector;
    StagingBuffer whole_;
    std::vector<IoRequest> requests_;
    Tensor values_;
    Device device_;
  };

  // The vector as last written (waits for its pieces), a new tensor on the device.
  Tensor read() const;
  // Writes `values` (numel elements), waiting until every piece is in the store.
  void write(const Tensor& values) const;
  // The same without waiting (a prefetch, a write-behind). The caller orders them: a read posted
  // while a write of the same vector is in flight may see either, so wait for the write first.
  // post_write copies `values` into its staging buffer before returning.
  Transfer post_read() const;
  Transfer post_write(const Tensor& values) const;

  int64_t numel() const { return numel_; }
  const OffloadStore& store() const { return *store_; }

 private:
  int64_t numel_;
  DType dtype_;
  Device device_;
  int64_t piece_numel_;
  void reserve();
  std::shared_ptr<OffloadStore> store_;
  std::vector<Segment> segments_;  // one per piece, in order
};

}  // namespace offload
}  // namespace dist
}  // namespace tessera
