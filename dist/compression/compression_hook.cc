#include "dist/compression/compression_hook.h"

#include <cmath>
#include <string>

#include "dist/compression/finite.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {
namespace compression {

CompressionHook::CompressionHook(std::unique_ptr<Compressor> compressor)
    : compressor_(std::move(compressor)) {
  TS_CHECK(compressor_ != nullptr, "CompressionHook: no compressor");
}

std::shared_ptr<Work> CompressionHook::reduce(ProcessGroup& group, GradBucket& bucket) {
  TS_CHECK(bucket.buffer.dtype() == kF32, "CompressionHook (", name(), "): bucket ", bucket.index,
           " holds ", bucket.buffer.dtype(), " gradients; compressors take f32 (f16/bf16 "
           "parameters are compressed to half precision already)");
  int64_t step = 0;
  {
    std::lock_guard<std::mutex> lock(steps_->mutex);
    step = steps_->count[bucket.index];
  }
  const CompressContext ctx{step, bucket.index, group.rank(), group.size()};
  const Tensor buffer = bucket.buffer;
  const std::shared_ptr<Compressor> c = compressor_;
  const Tensor input =
      all_finite(buffer) ? buffer : full({buffer.numel()}, std::nan(""), buffer.options());
  const Tensor message = c->compress(input, ctx);
  // After the decompression: keep or undo this step's state, alike on every rank.
  auto settle = [c, steps = steps_, ctx](const Tensor& out) {
    const bool keep = all_finite(out);
    c->settle(ctx.bucket, keep);
    if (keep) {
      std::lock_guard<std::mutex> lock(steps->mutex);
      ++steps->count[ctx.bucket];
    }
  };
  if (c->transport() == Transport::kAllReduce) {
    std::shared_ptr<Work> work = group.all_reduce(message, ReduceOp::kSum);
    return std::make_shared<ChainedWork>(work, [c, message, buffer, ctx, settle] {
      Tensor out = buffer;
      out.zero_();
      c->decompress_add(message, out, ctx);
      settle(out);
    });
  }
  const int64_t m = message.numel();
  TS_CHECK(m == c->message_bytes(buffer.numel()), "CompressionHook (", name(), "): a message of ",
           m, " bytes for ", buffer.numel(), " elements; its format says ",
           c->message_bytes(buffer.numel()));
  const Tensor gathered = empty({m * group.size()}, kU8);
  std::shared_ptr<Work> work = group.all_gather(message, gathered);
  return std::make_shared<ChainedWork>(work, [c, gathered, buffer, ctx, m, n = group.size(), settle] {
    Tensor out = buffer;
    out.zero_();
    for (int r = 0; r < n; ++r) {
      CompressContext from = ctx;
      from.rank = r;
      c->decompress_add(gathered.narrow(0, r * m, m), out, from);
    }
    settle(out);
  });
}

StateDict CompressionHook::state_dict() const {
  StateDict out;
  std::lock_guard<std::mutex> lock(steps_->mutex);
  for (const auto& [bucket, step] : steps_->count) {
    out.set("step." + std::to_string(bucket), scalar_tensor(static_cast<double>(step), kI64));
  }
  for (const auto& [key, t] : compressor_->state_dict()) out.set("compressor." + key, t);
  return out;
}

void CompressionHook::load_state_dict(const StateDict& state) {
  std::lock_guard<std::mutex> lock(steps_->mutex);
  steps_->count.clear();
  StateDict inner;
  for (const auto& [key, t] : state) {
    if (key.rfind("step.", 0) == 0) {
      steps_->count[std::stoul(key.substr(5))] = static_cast<int64_t>(t.item());
    } else if (key.rfind("compressor.", 0) == 0) {
      inner.set(key.substr(11), t);
    } else {
      TS_FAIL("CompressionHook::load_state_dict: unexpected key '", key, "'");
    }
  }
  compressor_->load_state_dict(inner);
}

}  // namespace compression
}  // namespace dist
}  // namespace tessera
