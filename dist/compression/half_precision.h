// fp16 / bf16 compression (PyTorch's fp16_compress_hook and bf16_compress_hook): the bucket is
// sent in half precision. All-reduce transport.
//
// Wire format: n elements of f16 (or bf16), 2n bytes: x / N rounded to half precision (divided
// by the world size first so that the f16 sum of N ranks stays in range); the summed message
// widened to f32 and multiplied by N is the sum of the ranks' roundings.
#pragma once

#include "dist/compression/compressor.h"

namespace tessera {
namespace dist {
namespace compression {

class HalfPrecision : public Compressor {
 public:
  explicit HalfPrecision(DType dtype);  // kF16 or kBF16
  std::string name() const override { return dtype_ == kF16 ? "fp16" : "bf16"; }
  Transport transport() const override { return Transport::kAllReduce; }
  int64_t message_bytes(int64_t n) const override { return 2 * n; }
  bool unbiased() const override { return true; }  // rounding to nearest: unbiased up to ties
  Tensor compress(const Tensor& x, const CompressContext& ctx) override;
  void decompress_add(const Tensor& message, Tensor& out, const CompressContext& ctx) const override;

 private:
  DType dtype_;
};

}  // namespace compression
}  // namespace dist
}  // namespace tessera
