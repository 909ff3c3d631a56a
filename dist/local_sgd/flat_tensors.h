// FlatTensors: a list of tensors laid out in one flat buffer per dtype, so that averaging a
// whole model over the group costs one all-reduce per dtype instead of one per tensor.
//
//   tensors (in order):   w0:f32[4x3]  b0:f32[3]  rm:f64[3]  w1:f32[2x3]
//   buffers (per dtype):  f32: [ w0 (12) | b0 (3) | w1 (6) ]      one all-reduce
//                         f64: [ rm (3) ]                          one all-reduce
//
// The dtypes come in the order they first appear in the list, and each tensor keeps its place
// in its dtype's buffer, so the layout is the same on every rank that lists the same tensors:
// the collectives pair up. Only floating-point tensors can be laid out (a mean of integers is
// not an integer); the callers leave integer tensors (BatchNorm's num_batches_tracked) out.
#pragma once

#include <cstdint>
#include <vector>

#include "dist/process_group.h"
#include "tensor/tensor.h"

namespace tessera {
namespace dist {

class FlatTensors {
 public:
  // The layout of `like` (shapes, dtypes and devices); the buffers are allocated, not filled.
  // `who` names the caller in error messages.
  FlatTensors(const std::vector<Tensor>& like, const char* who);

  size_t size() const { return shapes_.size(); }
  int64_t numel() const;  // elements over every buffer
  const std::vector<Tensor>& buffers() const { return buffers_; }
  // Tensor i's place in its buffer, in its shape (a view: writing it writes the buffer).
  Tensor view(size_t i) const;

  // Copies tensors[i] into view(i) for every i (the same shapes as the layout).
  void pack(const std::vector<Tensor>& tensors);
  // Copies view(i) into tensors[i] for every i.
  void unpack(const std::vector<Tensor>& tensors) const;
  // Collective: every buffer becomes its mean over the group (ReduceOp::kMean). The all-reduces
  // are issued together, in buffer order, before the first wait.
  void all_reduce_mean(ProcessGroup& group);

 private:
  void check_matches(const std::vector<Tensor>& tensors, const char* what) const;

  const char* who_;
  std::vector<Tensor> buffers_;
  std::vector<size_t> buffer_of_;
  std::vector<int64_t> offset_of_;
  std::vector<Shape> shapes_;
  std::vector<DType> dtypes_;
};

}  // namespace dist
}  // namespace tessera
