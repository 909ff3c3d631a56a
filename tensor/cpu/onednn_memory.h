// tessera tensors as oneDNN memory: the engine, buffers from tessera's allocator, a
// primitive's scratchpad, and an operand brought into (and back from) the layout a primitive
// wants (conv_onednn.cc's primitives use them).
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <unordered_map>

#include "tensor/cpu/channel_blocks.h"
#include "tensor/tensor.h"

namespace tessera {
namespace cpu {

// The CPU engine every convolution primitive runs on.
const dnnl::engine& onednn_engine();

// Memory for oneDNN in tessera's allocator, whose cache hands the same blocks back step after
// step. Memory oneDNN allocates itself (the primitives' copies of operands and their scratchpads)
// came fresh from the system on every call and was paid for in page faults: about 15,000 a
// step in ResNet-18's f32 step, against about 40 in its bf16 step, whose layouts need fewer.
Tensor onednn_buffer(const dnnl::memory::desc& desc);

// The scratchpad of a primitive made with scratchpad_mode::user (conv_onednn.cc's are), in
// tessera's allocator.
class Scratchpad {
 public:
  explicit Scratchpad(const dnnl::memory::desc& desc) {
    if (desc.get_size() == 0) return;
    buffer_ = onednn_buffer(desc);
    mem_ = dnnl::memory(desc, onednn_engine(), buffer_.raw_data());
  }
  void add_to(std::unordered_map<int, dnnl::memory>* args) const {
    if (buffer_.defined()) (*args)[DNNL_ARG_SCRATCHPAD] = mem_;
  }

 private:
  Tensor buffer_;
  dnnl::memory mem_;
};

// A tensor's data as oneDNN memory in the layout `wanted`: the tensor itself when the layouts and
// types agree, else a reordered copy (`to_primitive`), or a scratch buffer to reorder back from
// after the primitive ran (`from_primitive`). `plain` is the tensor's own layout in the primitive's
// type. An f16/bf16 tensor for an f32 primitive is converted on the way: in one pass where the
// primitive wants NCHW, nChw16c or tiles of 16 x 16 weight channels (channel_blocks.h), else
// widened into a plain f32 copy that oneDNN's reorder reads (narrowed after it on the way back).
// A bf16 activation for a native bf16 primitive that wants NHWC is transposed by transpose16.h,
// faster than oneDNN's own reorder for it.
class Operand {
 public:
  Operand(const dnnl::memory::desc& plain, const Tensor& t, const dnnl::memory::desc& wanted);
  const dnnl::memory& mem() const { return mem_; }
  void to_primitive(dnnl::stream& s);
  void from_primitive(dnnl::stream& s);

 private:
  enum class How {
    kSameType,          // the tensor itself, or oneDNN's reorder both ways
    kChannelBlocks,     // f16/bf16 activations <-> f32 nChw16c (channel_blocks.h)
    kWeightBlocks,      // f16/bf16 weights <-> f32 16x16 tiles (channel_blocks.h)
    kF32WeightTiles,    // f32 weights: oneDNN's reorder in, tessera's gather out
    kTransposeToNhwc,   // bf16 activations <-> bf16 NHWC (transpose16.h)
    kWidenAndReorder,   // f16/bf16 anything else: widened copy, oneDNN's reorder
  };

  static float* data(const dnnl::memory& m) { return static_cast<float*>(m.get_data_handle()); }
  static uint16_t* bits(void* p) { return static_cast<uint16_t*>(p); }
  int64_t n() const { return tensor_.size(0); }
  int64_t c() const { return tensor_.size(1); }
  int64_t positions() const { return tensor_.size(2) * tensor_.size(3); }
  // f(pointer to the tensor's f16 or bf16 data).
  template <typename F>
  void convert(F f) const {
    if (tensor_.dtype() == kF16) return f(tensor_.data<Half>());
    f(tensor_.data<BFloat16>());
  }

  Tensor tensor_;
  Tensor wide_;    // kWidenAndReorder: the f32 copy oneDNN's reorder reads or writes
  Tensor buffer_;  // the memory behind mem_ when it is not the tensor's own
  How how_ = How::kSameType;
  WeightBlocks weight_blocks_{};
  dnnl::memory user_, mem_;
};

}  // namespace cpu
}  // namespace tessera
