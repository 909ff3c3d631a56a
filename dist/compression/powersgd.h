// PowerSGD (Vogels, Karimireddy, Jaggi, "PowerSGD: Practical Low-Rank Gradient Compression for
// Distributed Optimization", NeurIPS 2019) as a DDP communication hook, with the semantics and
// knobs of PyTorch's powerSGD_hook (torch/distributed/algorithms/ddp_comm_hooks).
//
// The idea: a layer's gradient, viewed as a matrix M [rows x cols], is close to low rank, and
// one step of power iteration finds a rank-r approximation P Q^T whose factors add up across
// ranks. With Q [cols x r] the same on every rank:
//
//   P  = sum_ranks (M_i Q)                  all-reduce #2: rows*r numbers per matrix
//   P <- orthogonalize(P)                   Gram-Schmidt, column by column (same on every rank)
//   Q  = sum_ranks (M_i^T P) / N            all-reduce #3: cols*r numbers per matrix
//   M_approx = P Q^T  = P P^T mean_i(M_i)   the projection of the average onto span(P)
//
// and Q is kept for the next step (warm start: one more power-iteration step per training step).
// Tensors that would not shrink by at least min_compression_rate, and every 1-D tensor (biases),
// skip this and go in one flat all-reduce per bucket (#1).
//
// One bucket, one step after start_powerSGD_iter (the bytes on the wire, f32):
//
//   bucket.buffer   | b2 [4] | w2 [4 x 12] | b1 [12] | w1 [12 x 16] |     256 floats
//                   (DDP's buckets hold the parameters in reverse registration order)
//   #1 uncompressed [ b2 4 | b1 12 ]                                       16 floats
//   #2 P = M Q      [ P2 4 x r | P1 12 x r ]                               16 r floats
//   #3 Q = M^T P    [ Q2 12 x r | Q1 16 x r ]                              28 r floats
//
//   elements all-reduced per bucket per step:
//     E = U + sum over compressed matrices of r_m (rows_m + cols_m),  r_m = min(rows, cols, r)
//   where U counts the uncompressed tensors' elements; each of the three is a ring all-reduce
//   (an empty one is not issued), so a rank sends about 2 (N-1)/N * 4 E bytes, exactly
//   4 (2k - c[rank] - c[(rank+1) % N]) bytes for an all-reduce of k elements, c =
//   balanced_counts(k, N). Before start_powerSGD_iter: the plain all-reduce, 2 (N-1)/N * 4 n.
//   (Example above, r = 1, N = 2: 60 floats instead of 256, 240 bytes sent instead of 1024.)
//
// Conventions (PyTorch's, then tessera's sum):
//   - Each gradient is viewed as [shape[0], numel / shape[0]] (a conv weight [out, in, kh, kw]
//     as [out, in*kh*kw]). It is compressed iff dim >= 2 and
//     r_m (rows + cols) * min_compression_rate < rows * cols.
//     (PyTorch's formula alone keeps 1-D tensors out for any min_compression_rate >= 1; here
//     they stay out for every rate.)
//   - The all-reduced P is the SUM over ranks, not divided (it is orthogonalized, so its scale
//     does not matter); the all-reduced Q is divided by the world size N, so P Q^T approximates
//     the AVERAGE of the ranks' (gradient + residual). PyTorch's hook leaves that average (and
//     the uncompressed tensors' average) in the bucket; tessera's DDP divides the bucket by N
//     after the hook, so this hook leaves N times PyTorch's result: the all-reduced sum for the
//     uncompressed tensors and N P Q^T for the compressed ones.
//   - Error feedback, as PyTorch: before compressing, the bucket's residual from the last step
//     is added to the whole bucket (input = grad + residual); afterwards
//     residual = input - (PyTorch's result), i.e. input - P Q^T for compressed tensors and
//     input - mean over ranks for uncompressed ones (that part sums to zero over ranks: it
//     moves no average, only each rank's next input, and PyTorch keeps it too).
//   - The initial Q of a bucket (at start_powerSGD_iter with warm start, every step without) is
//     drawn from N(0, 1) by a Philox generator keyed by (random_seed, iteration, bucket index),
//     so every rank draws the same one (powersgd_initial_qs); PyTorch draws its seeds from one
//     numpy RandomState instead. Every Q is orthogonalized before use, the warm-started one too.
//   - Orthogonalization is PyTorch's Gram-Schmidt: column i /= (||column i|| + epsilon), then
//     removed from the later columns. With epsilon 0 a zero column stays zero (PyTorch's intent:
//     it logs and fills 0 instead of dividing by zero). PyTorch switches to a QR factorization
//     for f32 at rank > 2: the same span, columns equal up to sign.
//   - start_powerSGD_iter: PyTorch raises when it is < 2 with error feedback or warm start on;
//     so does this constructor (no clamping). The iteration counter advances once per DDP step:
//     a bucket whose index is not larger than the previous call's starts a new iteration.
//   - Steps that are not finite (tessera's; PyTorch's hook has no such check): a round's new
//     residual and Q are staged, and become the bucket's state only if its summed result is
//     finite. That result is the same on every rank (all-reduced sums, P and Q), so every rank
//     decides alike, including one whose own gradient was finite while a peer's overflowed.
//     An iteration in which any bucket's result (a plain all-reduce's too) is not finite does
//     not count: the GradScaler skips that step, so it is as if it never ran (iter, and the
//     steps to start_powerSGD_iter, count the steps taken). Without this, one fp16 overflow
//     left inf - inf = NaN in the residual and Q, and every later step was NaN and skipped.
//
// The asynchronous structure. The three all-reduces of a bucket depend on each other (#3 needs
// the orthogonalized result of #2), and the comm thread only runs collectives. So:
//
//   reduce(bucket b):    finish the P phase of bucket b-1 (wait #2, orthogonalize, Q = M^T P,
//                        issue #3 of b-1); add residual, P = M Q, issue #1 and #2 of b
//   wait() of b's Work:  the same for b if nothing did it yet, then wait #3 and #1 and
//                        decompress (P Q^T, residual, the sum into the bucket)
//
// The backward thread thus blocks in reduce(b) on bucket b-1's P all-reduce, which was issued
// one bucket earlier and has usually finished; the last bucket's Q phase runs in DDP's wait.
// The order of collectives depends only on the order of reduce() and wait() calls, which DDP
// makes the same on every rank. One hook serves one DDP model (its state is keyed by bucket
// index), and it must outlive the Works it returned.
//
// State (state_dict/load_state_dict, at step boundaries): "iter" (I64 scalar: the iterations
// done), "bucket.<b>.residual" (f32, the bucket's numel) and "bucket.<b>.q.<k>" (f32
// [cols, r_m], the warm-start Q of the bucket's k-th gradient, only compressed ones). Loaded
// tensors are checked against the bucket at its first reduction after loading.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dist/ddp/comm_hooks.h"
#include "dist/process_group.h"
#include "tensor/state_dict.h"
#include "tensor/tensor.h"

namespace tessera {
namespace dist {
namespace compression {

class PowerSGDOptions {
 public:
  PowerSGDOptions& matrix_approximation_rank(int64_t r) { rank_ = r; return *this; }
  PowerSGDOptions& start_powerSGD_iter(int64_t i) { start_ = i; return *this; }
  PowerSGDOptions& min_compression_rate(double c) { min_rate_ = c; return *this; }
  PowerSGDOptions& use_error_feedback(bool e) { error_feedback_ = e; return *this; }
  PowerSGDOptions& warm_start(bool w) { warm_start_ = w; return *this; }
  PowerSGDOptions& orthogonalization_epsilon(double e) { epsilon_ = e; return *this; }
  PowerSGDOptions& random_seed(uint64_t s) { seed_ = s; return *this; }
  int64_t matrix_approximation_rank() const { return rank_; }
  int64_t start_powerSGD_iter() const { return start_; }
  double min_compression_rate() const { return min_rate_; }
  bool use_error_feedback() const { return error_feedback_; }
  bool warm_start() const { return warm_start_; }
  double orthogonalization_epsilon() const { return epsilon_; }
  uint64_t random_seed() const { return seed_; }
  // Throws, naming the value, unless: rank >= 1; start_powerSGD_iter >= 0, and >= 2 when error
  // feedback or warm start is on (PyTorch's rule); min_compression_rate and epsilon finite, >= 0.
  void check() const;

 private:
  int64_t rank_ = 1, start_ = 1000;  // PyTorch's defaults
  double min_rate_ = 2, epsilon_ = 0;
  bool error_feedback_ = true, warm_start_ = true;
  uint64_t seed_ = 0;
};

// How one bucket is split: which gradients are compressed (with their matrix shapes and where
// their P and Q sit in the flat P and Q buffers), and how many elements each all-reduce carries.
struct PowerSGDPlan {
  struct Matrix {
    size_t gradient = 0;  // position in GradBucket::gradients
    int64_t rows = 0, cols = 0, rank = 0;
    int64_t p_offset = 0, q_offset = 0;
  };
  std::vector<Matrix> matrices;       // compressed, in bucket order
  std::vector<size_t> uncompressed;   // positions of the rest, in bucket order
  int64_t uncompressed_numel = 0, p_numel = 0, q_numel = 0;
  int64_t wire_numel() const { return uncompressed_numel + p_numel + q_numel; }
};

PowerSGDPlan plan_powersgd(const GradBucket& bucket, const PowerSGDOptions& options);
// The same from the gradients' shapes alone (what the cost models know: cost/compression.h).
PowerSGDPlan plan_powersgd(const std::vector<Shape>& shapes, const PowerSGDOptions& options);

// The initial Qs of a bucket at `iter` (before orthogonalization): N(0, 1), [cols, rank] per
// compressed matrix, drawn in order from one Philox stream keyed by (seed, iter, bucket).
std::vector<Tensor> powersgd_initial_qs(uint64_t seed, int64_t iter, size_t bucket,
                                        const PowerSGDPlan& plan, const TensorOptions& options = kF32);

// Gram-Schmidt in place on a [rows, r] f32 matrix, as described above.
void orthogonalize(const Tensor& matrix, double epsilon);

class PowerSGDHook : public CommunicationHook {
 public:
  explicit PowerSGDHook(const PowerSGDOptions& options = PowerSGDOptions());
  ~PowerSGDHook() override;

  std::string name() const override;  // "powersgd:<rank>"
  std::shared_ptr<Work> reduce(ProcessGroup& group, GradBucket& bucket) override;
  StateDict state_dict() const override;
  void load_state_dict(const StateDict& state) override;

  const PowerSGDOptions& options() const { return options_; }
  // PyTorch's state.iter: iterations reduced so far (counting the one in progress, unless its
  // result was not finite).
  int64_t iter() const;

 private:
  struct BucketState {
    Tensor residual;                    // error feedback: the bucket's numel
    Tensor q;                           // warm start: the flat Qs, laid out by `plan`
    PowerSGDPlan plan;                  // the bucket's split, from its first compression
    std::map<size_t, Tensor> loaded_q;  // load_state_dict's Qs by gradient, until first use
  };
  struct Round;
  class RoundWork;

  int64_t iterations() const;  // iter(), with mutex_ held
  void start_q_phase(Round& round);
  void flush_p_phases(const Round* through);  // FIFO, up to `through` (all when null)
  void finish(Round& round);

  PowerSGDOptions options_;
  mutable std::mutex mutex_;
  std::map<size_t, BucketState> buckets_;
  std::deque<std::shared_ptr<Round>> awaiting_q_;  // P all-reduce issued, Q not yet
  int64_t completed_ = 0;     // iterations finished before the current one
  int64_t last_index_ = -1;   // bucket last reduced in the current iteration, -1: none yet
  bool skipping_ = false;     // the current iteration's result was not finite: it won't count
};

}  // namespace compression
}  // namespace dist
}  // namespace tessera
