#include "dist/context_parallel/ulysses_attention.h"

#include <cmath>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/custom_op.h"
#include "autograd/functions.h"
#include "tensor/check.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {
namespace context_parallel {

namespace {

constexpr int kToHeadsTag = 0x5553;     // "US"
constexpr int kToSequenceTag = 0x5554;

// parts[j] goes to rank j (this rank's own stays); returns what every rank sent here, in rank
// order, each shaped as the part this rank sent to it.
std::vector<Tensor> all_to_all(const std::vector<Tensor>& parts, ProcessGroup& group, int tag) {
  const int c = group.size(), me = group.rank();
  std::vector<Tensor> received(c);
  std::vector<std::shared_ptr<Work>> works;
  for (int j = 0; j < c; ++j) {
    if (j == me) {
      received[j] = parts[j];
      continue;
    }
    received[j] = empty_like(parts[j]);
    works.push_back(group.recv(received[j].view({received[j].numel()}), j, tag));
  }
  for (int j = 0; j < c; ++j) {
    if (j != me) works.push_back(group.send(parts[j].view({parts[j].numel()}), j, tag));
  }
  for (const auto& w : works) w->wait();
  return received;
}

// The layout of one call: the ranks' positions, and for the whole sequence gathered in rank
// order, the row holding each position.
struct Layout {
  ProcessGroup* group;
  int ranks, heads_per_rank;
  std::vector<Tensor> rows_of;  // per rank: its positions, i64 [T/C]
  Tensor in_position_order;     // i64 [T]: row of the rank-ordered sequence at each position

  Layout(ProcessGroup& g, int64_t heads, int64_t local_rows, SequenceSplit split, Device device)
      : group(&g), ranks(g.size()) {
    TS_CHECK(heads % ranks == 0, "ulysses_attention: DeepSpeed-Ulysses splits the ", heads,
             " heads over the ", ranks, " context-parallel ranks, and ", ranks,
             " does not divide ", heads);
    heads_per_rank = static_cast<int>(heads / ranks);
    const int64_t seq_len = local_rows * ranks;
    check_sequence_length(seq_len, ranks, "ulysses_attention");
    std::vector<int64_t> order;
    for (int r = 0; r < ranks; ++r) {
      const std::vector<int64_t> p = rank_positions(seq_len, r, ranks, split).expand();
      rows_of.push_back(from_vector<int64_t>(p, {local_rows}).to(TensorOptions(kI64).device(device)));
      order.insert(order.end(), p.begin(), p.end());
    }
    std::vector<int64_t> source(seq_len);
    for (int64_t j = 0; j < seq_len; ++j) source[order[j]] = j;
    in_position_order = from_vector<int64_t>(source, {seq_len}).to(TensorOptions(kI64).device(device));
  }

  // [B, H, T/C, D] this rank's rows -> [B, H/C, T, D] its heads, every position in order.
  Tensor to_heads(const Tensor& x) const {
    std::vector<Tensor> parts;
    for (int j = 0; j < ranks; ++j) {
      parts.push_back(x.narrow(1, j * heads_per_rank, heads_per_rank).contiguous());
    }
    const std::vector<Tensor> got = all_to_all(parts, *group, kToHeadsTag);
    return index_select(cat(got, 2), 2, in_position_order);
  }
  // The inverse: [B, H/C, T, D] -> [B, H, T/C, D].
  Tensor to_sequence(const Tensor& y) const {
    std::vector<Tensor> parts;
    for (int i = 0; i < ranks; ++i) parts.push_back(index_select(y, 2, rows_of[i]).contiguous());
    return cat(all_to_all(parts, *group, kToSequenceTag), 1);
  }
};

}  // namespace

Variable ulysses_attention(const Variable& q_in, const Variable& k_in, const Variable& v_in,
                           double scale, const std::shared_ptr<ProcessGroup>& group,
                           SequenceSplit split) {
  TS_CHECK(group != nullptr, "ulysses_attention: the context-parallel group is null");
  const auto in = autocast_args("causal_attention", q_in, k_in, v_in);
  const Variable &q = in[0], &k = in[1], &v = in[2];
  TS_CHECK(q.dim() == 4 && k.shape() == q.shape() && v.shape() == q.shape(),
           "ulysses_attention: q, k and v must be this rank's rows [B, H, T/C, D], one shape, "
           "got q ", q.shape(), ", k ", k.shape(), ", v ", v.shape());
  const Layout layout(*group, q.size(1), q.size(2), split, q.data().device());
  const Tensor qh = layout.to_heads(q.data()), kh = layout.to_heads(k.data()),
               vh = layout.to_heads(v.data());
  const CausalAttentionResult r = causal_attention(qh, kh, vh, scale);
  return record("UlyssesAttentionBackward", layout.to_sequence(r.output), {q, k, v},
                [layout, qh, kh, vh, r, scale, group](const Tensor& g) {
                  const CausalAttentionGrads grads = causal_attention_backward(
                      layout.to_heads(g.contiguous()), qh, kh, vh, r.output, r.logsumexp, scale);
                  return Grads{layout.to_sequence(grads.q), layout.to_sequence(grads.k),
                               layout.to_sequence(grads.v)};
                });
}

Variable ulysses_self_attention(const Variable& qkv, int64_t n_head,
                                const std::shared_ptr<ProcessGroup>& group, SequenceSplit split) {
  const char* op = "ulysses_self_attention";
  TS_CHECK(qkv.dim() == 3, op, ": expected qkv of shape [B, T/C, 3C], got shape ", qkv.shape());
  TS_CHECK(n_head > 0 && qkv.size(2) % (3 * n_head) == 0, op, ": the last dim of qkv ",
           qkv.shape(), " must be 3 x n_head x head_dim, with n_head = ", n_head);
  const int64_t b = qkv.size(0), t = qkv.size(1), c = qkv.size(2) / 3, d = c / n_head;
  const Variable heads = permute(reshape(qkv, {b, t, 3, n_head, d}), {2, 0, 3, 1, 4});
  const Variable y = ulysses_attention(select(heads, 0, 0), select(heads, 0, 1),
                                       select(heads, 0, 2), 1.0 / std::sqrt(static_cast<double>(d)),
                                       group, split);  // [B, H, T/C, D]
  return reshape(permute(y, {0, 2, 1, 3}), {b, t, c});
}

}  // namespace context_parallel
}  // namespace dist
}  // namespace tessera
