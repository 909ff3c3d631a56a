#include "dist/context_parallel/ring_attention.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <future>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/custom_op.h"
#include "tensor/check.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {
namespace context_parallel {

namespace {

// Point-to-point tags of the ring's three kinds of message (each kind in order between a pair).
constexpr int kForwardKVTag = 0x5241;  // "RA"
constexpr int kBackwardKVTag = 0x5242;
constexpr int kGradKVTag = 0x5243;

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Adds the seconds since `start` to *total (when timing) and restarts the clock.
void lap(double* start, double* total) {
  const double t = now();
  if (total != nullptr) *total += t - *start;
  *start = t;
}

// Whether any key of `keys` is visible to some query of `queries` (key s <= query p).
bool any_visible(const AttentionPositions& queries, const AttentionPositions& keys) {
  int64_t last_query = -1, first_key = INT64_MAX;
  for (const auto& run : queries.runs) {
    if (run.length > 0) last_query = std::max(last_query, run.start + run.length - 1);
  }
  for (const auto& run : keys.runs) {
    if (run.length > 0) first_key = std::min(first_key, run.start);
  }
  return first_key <= last_query;
}

Tensor flat(const Tensor& t) { return t.view({t.numel()}); }

// One call's layout: this rank, its neighbours and every rank's positions.
struct Ring {
  ProcessGroup* group;
  int rank, size, left, right;
  std::vector<AttentionPositions> positions;  // per rank
  AttentionBlocks blocks;
  RingAttentionStats* stats;

  Ring(ProcessGroup& g, int64_t local_rows, const RingAttentionOptions& o)
      : group(&g),
        rank(g.rank()),
        size(g.size()),
        left((g.rank() + g.size() - 1) % g.size()),
        right((g.rank() + 1) % g.size()),
        blocks(o.blocks_),
        stats(o.stats_) {
    const int64_t seq_len = local_rows * size;
    check_sequence_length(seq_len, size, "ring_attention");
    for (int r = 0; r < size; ++r) positions.push_back(rank_positions(seq_len, r, size, o.split_));
  }
  // The block rank `rank` holds at forward step s (K/V move right: it came from s ranks to the
  // left), and at backward step s (they move left, this rank's own block last).
  int forward_owner(int step) const { return (rank - step + size) % size; }
  int backward_owner(int step) const { return (rank + 1 + step) % size; }
  const AttentionPositions& mine() const { return positions[rank]; }
};

// One hop of the ring: sends `outgoing` to rank `to` and receives a tensor of its shape from
// rank `from`, both posted now. MPI moves a message only inside MPI calls (a large one needs
// both ends' calls to go through its rendezvous), so a helper thread waits on the two, polling,
// while this thread computes: it plays the part of a GPU's communication stream, without which
// the transfer would start only when the compute is done and nothing would be hidden.
struct Exchange {
  Tensor next;
  std::future<double> done;  // when the receive had arrived
  RingAttentionStats* stats;
  int kind, step;
  double posted;

  Exchange(const Ring& ring, const Tensor& outgoing, int to, int from, int tag, int kind, int step)
      : next(empty_like(outgoing)), stats(ring.stats), kind(kind), step(step), posted(now()) {
    std::shared_ptr<Work> recv = ring.group->recv(flat(next), from, tag);
    std::shared_ptr<Work> send = ring.group->send(flat(outgoing), to, tag);
    done = std::async(std::launch::async, [recv, send] {
      recv->wait();
      const double arrived = now();
      send->wait();
      return arrived;
    });
  }
  // What arrived (rethrows the transfer's error).
  Tensor finish() {
    const double needed = now();
    const double arrived = done.get();
    if (stats) stats->exchanges.push_back({kind, step, posted, arrived, needed});
    return next;
  }
};

// The forward's result, and the block of K/V its last step computed with (rank r + 1's), which
// the backward starts from.
struct RingForward {
  CausalAttentionResult result;
  Tensor last_kv;  // [2, B, H, T/C, D]
};

RingForward ring_forward(const Tensor& q, const Tensor& k, const Tensor& v, double scale,
                         const Ring& ring) {
  double clock = now();
  RingAttentionStats* st = ring.stats;
  Tensor current = stack(std::vector<Tensor>{k, v}, 0).contiguous();  // [2, B, H, T/C, D]
  CausalAttentionResult acc;
  for (int step = 0; step < ring.size; ++step) {
    std::unique_ptr<Exchange> exchange;
    if (step + 1 < ring.size) {
      exchange = std::make_unique<Exchange>(ring, current, ring.right, ring.left, kForwardKVTag,
                                            RingAttentionStats::kForwardKV, step);
    }
    const int owner = ring.forward_owner(step);
    if (any_visible(ring.mine(), ring.positions[owner])) {
      const CausalAttentionResult part =
          causal_attention_block(q, current.select(0, 0), current.select(0, 1), scale, ring.mine(),
                                 ring.positions[owner], ring.blocks);
      acc = acc.output.defined() ? combine_attention(acc, part) : part;
      if (st) ++st->blocks_computed;
    } else if (st) {
      ++st->blocks_skipped;
    }
    lap(&clock, st ? &st->forward_compute_seconds : nullptr);
    if (exchange) current = exchange->finish();
    lap(&clock, st ? &st->forward_wait_seconds : nullptr);
  }
  // Step 0 is this rank's own block, whose diagonal every query sees: acc is defined.
  return {acc, current};
}

// dQ of this rank's queries and dK, dV of its own keys and values.
CausalAttentionGrads ring_backward(const Tensor& grad_out, const Tensor& q, const RingForward& fwd,
                                   double scale, const Ring& ring) {
  double clock = now();
  RingAttentionStats* st = ring.stats;
  const CausalAttentionResult& attention = fwd.result;
  Tensor current = fwd.last_kv;  // rank r + 1's block (this rank's own when C = 1)
  Tensor grad_q = zeros(q.shape(), attention.output.options());
  Tensor grad_kv;                      // the accumulator of the block in hand
  std::unique_ptr<Exchange> grad_hop;  // the previous one, sent left; this one, arriving
  for (int step = 0; step < ring.size; ++step) {
    std::unique_ptr<Exchange> exchange;
    if (step + 1 < ring.size) {
      exchange = std::make_unique<Exchange>(ring, current, ring.left, ring.right, kBackwardKVTag,
                                            RingAttentionStats::kBackwardKV, step);
    }
    const int owner = ring.backward_owner(step);
    CausalAttentionGrads part;
    if (any_visible(ring.mine(), ring.positions[owner])) {
      part = causal_attention_block_backward(
          grad_out, q, current.select(0, 0), current.select(0, 1), attention.output,
          attention.logsumexp, scale, ring.mine(), ring.positions[owner], ring.blocks);
      add_(grad_q, part.q);
    }
    lap(&clock, st ? &st->backward_compute_seconds : nullptr);
    // The block's accumulator: fresh at step 0, else from the right, where this block was the
    // step before (sent while this step computed).
    grad_kv = step == 0 ? zeros(current.shape(), attention.output.options().device(q.device()))
                        : grad_hop->finish();
    lap(&clock, st ? &st->backward_wait_seconds : nullptr);
    if (part.k.defined()) {
      Tensor gk = grad_kv.select(0, 0), gv = grad_kv.select(0, 1);
      add_(gk, part.k);
      add_(gv, part.v);
    }
    // On to the left, which holds this block next; the last step's block is this rank's own,
    // and its accumulator, complete, stays.
    if (step + 1 < ring.size) {
      grad_hop = std::make_unique<Exchange>(ring, grad_kv, ring.left, ring.right, kGradKVTag,
                                            RingAttentionStats::kGradKV, step);
    }
    lap(&clock, st ? &st->backward_compute_seconds : nullptr);
    if (exchange) current = exchange->finish();
    lap(&clock, st ? &st->backward_wait_seconds : nullptr);
  }
  return {grad_q.to(q.dtype()), grad_kv.select(0, 0).to(q.dtype()),
          grad_kv.select(0, 1).to(q.dtype())};
}

void check_inputs(const Tensor& q, const Tensor& k, const Tensor& v,
                  const std::shared_ptr<ProcessGroup>& group) {
  TS_CHECK(group != nullptr, "ring_attention: the context-parallel group is null");
  TS_CHECK(q.dim() == 4 && k.shape() == q.shape() && v.shape() == q.shape(),
           "ring_attention: q, k and v must be this rank's rows [B, H, T/C, D], one shape, got q ",
           q.shape(), ", k ", k.shape(), ", v ", v.shape());
}

}  // namespace

Variable ring_attention(const Variable& q_in, const Variable& k_in, const Variable& v_in,
                        double scale, const std::shared_ptr<ProcessGroup>& group,
                        const RingAttentionOptions& options) {
  const auto in = autocast_args("causal_attention", q_in, k_in, v_in);
  const Variable &q = in[0], &k = in[1], &v = in[2];
  check_inputs(q.data(), k.data(), v.data(), group);
  const Ring ring(*group, q.size(2), options);
  const RingForward fwd = ring_forward(q.data(), k.data(), v.data(), scale, ring);
  return record("RingAttentionBackward", fwd.result.output.to(q.dtype()), {q, k, v},
                [q = q.data(), fwd, scale, ring, group](const Tensor& g) {
                  const CausalAttentionGrads grads = ring_backward(g, q, fwd, scale, ring);
                  return Grads{grads.q, grads.k, grads.v};
                });
}

// As autograd/functions_attention.cc's causal_self_attention: qkv [B, T, 3C] viewed as
// [B, T, 3, H, D] and permuted to [3, B, H, T, D] gives the three operands in one copy.
Variable ring_self_attention(const Variable& qkv_in, int64_t n_head,
                             const std::shared_ptr<ProcessGroup>& group,
                             const RingAttentionOptions& options) {
  const char* op = "ring_self_attention";
  const Variable qkv = autocast_args("causal_self_attention", qkv_in)[0];
  TS_CHECK(qkv.dim() == 3, op, ": expected qkv of shape [B, T/C, 3C], got shape ", qkv.shape());
  TS_CHECK(n_head > 0 && qkv.size(2) % (3 * n_head) == 0, op, ": the last dim of qkv ", qkv.shape(),
           " must be 3 x n_head x head_dim, with n_head = ", n_head);
  const int64_t b = qkv.size(0), t = qkv.size(1), c = qkv.size(2) / 3, d = c / n_head;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  const Tensor heads = qkv.data().view({b, t, 3, n_head, d}).permute({2, 0, 3, 1, 4}).contiguous();
  const Tensor q = heads.select(0, 0), k = heads.select(0, 1), v = heads.select(0, 2);
  check_inputs(q, k, v, group);
  const Ring ring(*group, t, options);
  const RingForward fwd = ring_forward(q, k, v, scale, ring);
  const Tensor y =
      fwd.result.output.to(qkv.dtype()).permute({0, 2, 1, 3}).contiguous().view({b, t, c});
  return record("RingSelfAttentionBackward", y, {qkv},
                [q, fwd, scale, ring, group, b, t, c, n_head, d](const Tensor& g) {
                  const Tensor g_heads = g.reshape({b, t, n_head, d}).permute({0, 2, 1, 3});
                  const CausalAttentionGrads grads = ring_backward(g_heads, q, fwd, scale, ring);
                  const Tensor packed = stack(std::vector<Tensor>{grads.q, grads.k, grads.v}, 0);
                  return Grads{packed.permute({1, 3, 0, 2, 4}).contiguous().view({b, t, 3 * c})};
                });
}

}  // namespace context_parallel
}  // namespace dist
}  // namespace tessera
