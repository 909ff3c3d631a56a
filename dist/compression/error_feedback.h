// Error feedback (Seide et al. 2014, 1-bit SGD; Karimireddy et al. 2019, EF-SGD) as one wrapper
// around any compressor: what compression drops this step is added back before the next.
//
//   y_t     = g_t + e_t            (the gradient plus the residual kept from the last step)
//   message = C(y_t)               (the inner compressor)
//   e_{t+1} = y_t - D(C(y_t))      (what the message does not carry; f32, per bucket)
//
// So over T steps, sum_t D(C(y_t)) + e_T = sum_t g_t exactly (up to f32 rounding): nothing is
// lost, only delayed, which is why biased compressors (top-k, sign) converge with it. The
// residuals are state (state_dict: "residual.B"), saved with the hook.
//
// A step whose summed result is not finite (one rank's fp16 overflow: the GradScaler skips it)
// must not leave e_{t+1} = inf - inf = NaN behind, or every later step is NaN too and skipped.
// So compress() keeps the residual it replaced until the hook settles the bucket: settle(B,
// false) puts it back, as if the step never happened; settle(B, true) lets it go.
#pragma once

#include <map>
#include <memory>

#include "dist/compression/compressor.h"

namespace tessera {
namespace dist {
namespace compression {

class ErrorFeedback : public Compressor {
 public:
  explicit ErrorFeedback(std::unique_ptr<Compressor> inner);
  std::string name() const override { return inner_->name() + "+ef"; }
  Transport transport() const override { return inner_->transport(); }
  int64_t message_bytes(int64_t n) const override { return inner_->message_bytes(n); }
  bool unbiased() const override { return inner_->unbiased(); }
  Tensor compress(const Tensor& x, const CompressContext& ctx) override;
  void decompress_add(const Tensor& message, Tensor& out, const CompressContext& ctx) const override {
    inner_->decompress_add(message, out, ctx);
  }
  void settle(size_t bucket, bool keep) override;
  StateDict state_dict() const override;
  void load_state_dict(const StateDict& state) override;
  // The residual of a bucket (undefined before its first compression).
  Tensor residual(size_t bucket) const;
  const Compressor& inner() const { return *inner_; }

 private:
  std::unique_ptr<Compressor> inner_;
  std::map<size_t, Tensor> residuals_;
  std::map<size_t, Tensor> replaced_;  // per bucket, until settled: the residual before compress()
};

}  // namespace compression
}  // namespace dist
}  // namespace tessera
