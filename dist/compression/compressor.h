// Gradient compression for DDP (the lecture's communication-efficient data parallelism): a
// Compressor turns a bucket's f32 gradient into a smaller message and a message back into a
// dense approximation; a CompressionHook (a dist::CommunicationHook) runs one over every DDP
// bucket, exchanges the messages and leaves the sum of the ranks' approximations in the bucket.
//
// Two transport classes, by whether messages add up:
//
//   all-reduce   the sum of the ranks' messages is the message of the sum (fp16/bf16, random-k
//                with indices every rank draws alike): one ring all-reduce of the message,
//                2 (N-1)/N m bytes sent per rank whatever N, then one decompression;
//   all-gather   messages do not add (top-k's indices differ per rank; QSGD's and sign's
//                scales are per rank): a ring all-gather of every rank's message,
//                (N-1) m bytes sent per rank, growing with N, then N decompressions.
//
// So at N ranks an all-gather compressor with message m pays off against an uncompressed
// all-reduce of 4n bytes only while (N-1) m < 2 (N-1)/N 4n, i.e. m < 8n / N.
//
// Each compressor writes its wire format down in its header. Random choices (random-k's
// indices, QSGD's rounding) come from Philox counters keyed by (seed, step, bucket[, rank]), so
// a test can replay them and every rank draws what it must.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tensor/state_dict.h"
#include "tensor/tensor.h"

namespace tessera {
namespace dist {
namespace compression {

enum class Transport { kAllReduce, kAllGather };

// Where a compression happens: the bucket's reduction count so far, its index, the rank.
struct CompressContext {
  int64_t step = 0;
  size_t bucket = 0;
  int rank = 0;
  int world = 1;
};

class Compressor {
 public:
  virtual ~Compressor() = default;
  // "topk:0.01", "qsgd:16", ... (the train tool's spelling).
  virtual std::string name() const = 0;
  virtual Transport transport() const = 0;
  // One rank's message for a bucket of n elements, in bytes: its wire format's size.
  virtual int64_t message_bytes(int64_t n) const = 0;
  // x: a bucket's values, f32, flat. All-gather compressors return kU8 bytes of exactly
  // message_bytes(n); all-reduce ones a tensor whose sum over ranks decompresses to the sum of
  // the ranks' approximations.
  virtual Tensor compress(const Tensor& x, const CompressContext& ctx) = 0;
  // Adds the dense approximation `message` stands for into `out` (f32, n elements). `ctx` is
  // the compressing rank's (its step and bucket; for all-reduce messages the rank is anyone's).
  virtual void decompress_add(const Tensor& message, Tensor& out, const CompressContext& ctx) const = 0;
  // Unbiased compressors (E[C(x)] = x) need no error feedback to converge; biased ones do.
  virtual bool unbiased() const = 0;
  // The hook settles every compress() of a bucket once the ranks' summed result is known, the
  // same on every rank: keep = it is finite. When it is not (an fp16 overflow: the GradScaler
  // skips the step), a compressor with state undoes what that compress() changed, so the step
  // leaves no trace; a stateless one has nothing to do.
  virtual void settle(size_t bucket, bool keep) { (void)bucket; (void)keep; }
  // State across steps (error feedback's residuals).
  virtual StateDict state_dict() const { return StateDict(); }
  virtual void load_state_dict(const StateDict& state) { (void)state; }
};

// The dense approximation of a message alone: decompress_add into zeros.
Tensor decompress(const Compressor& c, const Tensor& message, int64_t n, const CompressContext& ctx);

// The entries a sparsifier keeps of n: ceil(ratio n), at least 1 and at most n.
int64_t sparse_count(double ratio, int64_t n);
// "topk:0.01": a compressor's name with its ratio, as the train tool spells it.
std::string with_ratio(const char* kind, double ratio);

// Philox-keyed randomness: a seed for (seed, step, bucket, rank) and uniform draws from it.
uint64_t draw_seed(uint64_t seed, int64_t step, size_t bucket, int rank);
double uniform(uint64_t seed, uint64_t i);        // the i-th draw in [0, 1)
uint32_t random_word(uint64_t seed, uint64_t i);  // the i-th 32-bit word

}  // namespace compression
}  // namespace dist
}  // namespace tessera
