#include "cost/activation_memory.h"

#include "tensor/check.h"

namespace tessera {
namespace cost {

BlockActivations block_activations(const models::Recompute& r, const SequenceLayout& layout,
                                   int64_t heads_per_rank) {
  using G = models::Recompute::Granularity;
  const bool sp = layout.sequence_parallel;
  // Slots of s b h elements: those every tensor-parallel rank keeps whole (the LayerNorms'
  // outputs, the residual after attention, the block's output), unless sequence parallelism
  // splits them; those split by heads or features (q, k, v, the attention output twice, c_fc's
  // and GELU's outputs).
  BlockActivations k;
  k.whole_sbh = 4;
  k.split_sbh = 13;
  k.statistics_sb = 16;
  k.logsumexp_asb = 4;
  if (r.granularity == G::kFull) {
    k = BlockActivations();
    k.whole_sbh = 1;  // the block's input, its checkpoint's
  } else if (r.granularity == G::kSelective) {
    if (r.core_attn) {  // q, k, v and the output in the heads' layout, the output in the tokens'
      k.split_sbh -= 2;  // and the logsumexp, for c_attn's output qkv
      k.logsumexp_asb = 0;
    }
    if (r.layernorm) {  // ln_1's and ln_2's outputs and their statistics; their inputs stay
      k.whole_sbh -= 2;
      k.statistics_sb = 0;
    }
    if (r.gelu) k.split_sbh -= 4;  // GELU's output; c_fc's output (its input) stays
  }
  // One head a rank: the attention output in the heads' layout [B, 1, s, D] is already the
  // tokens' [B, s, D], one tensor kept by both.
  const bool core_kept = r.granularity == G::kNone ||
                         (r.granularity == G::kSelective && !r.core_attn);
  if (heads_per_rank == 1 && core_kept) k.split_sbh -= 1;
  // Ring attention keeps the last key/value block it received (its backward starts there): 2.
  if (layout.context_parallel > 1 && core_kept) k.split_sbh += 2;
  if (sp) {  // everything whole above is this rank's s/T tokens
    k.split_sbh += k.whole_sbh;
    k.whole_sbh = 0;
  }
  return k;
}

double paper_block_bytes(const models::GPTConfig& c, int64_t b, int64_t s,
                         const SequenceLayout& layout) {
  // Korthikanti et al. 2022, Table 2, with s the rank's tokens under context parallelism.
  const double t = layout.tensor_parallel;
  const double sbh = static_cast<double>(s) / layout.context_parallel * b * c.n_embd;
  const double attention = 5.0 * c.n_head * (static_cast<double>(s) / layout.context_parallel) /
                           c.n_embd;
  const double whole = layout.sequence_parallel ? 10.0 / t : 10.0;
  using G = models::Recompute::Granularity;
  switch (c.recompute.granularity) {
    case G::kFull: return 2.0 * sbh / (layout.sequence_parallel ? t : 1.0);
    case G::kSelective:
      return sbh * (whole + 24.0 / t + (c.recompute.core_attn ? 0.0 : attention / t));
    case G::kNone: break;
  }
  return sbh * (whole + 24.0 / t + attention / t);
}

std::vector<ActivationRow> gpt_activations(const models::GPTConfig& c, int64_t b, int64_t s,
                                           Precision precision, const SequenceLayout& layout) {
  TS_CHECK(b >= 1 && s >= 1 && s <= c.context, "gpt_activations: batch ", b, " and ", s,
           " tokens (context ", c.context, ")");
  const int64_t t = layout.tensor_parallel, cp = layout.context_parallel;
  TS_CHECK(t >= 1 && cp >= 1, "gpt_activations: T = ", t, ", C = ", cp, " (each must be >= 1)");
  TS_CHECK(c.n_head % t == 0 && c.vocab_size % t == 0, "gpt_activations: T = ", t,
           " does not divide ", c.n_head, " heads and a vocabulary of ", c.vocab_size);
  TS_CHECK(!layout.sequence_parallel || t > 1, "gpt_activations: sequence parallelism needs T > 1");
  TS_CHECK(s % (cp == 1 ? 1 : 2 * cp) == 0 && (s / cp) % (layout.sequence_parallel ? t : 1) == 0,
           "gpt_activations: ", s, " tokens do not divide into ", cp == 1 ? 1 : 2 * cp,
           " chunks of a multiple of ", layout.sequence_parallel ? t : 1, " tokens");
  const int64_t p = precision == Precision::kMixed ? 2 : 4;
  const int64_t sr = s / cp;  // this rank's tokens
  const int64_t h = c.n_embd, a = c.n_head, v = c.vocab_size, sb = sr * b, sbh = sb * h;
  const bool sp = layout.sequence_parallel;
  const int64_t seq_share = sp ? t : 1;  // what sequence parallelism divides
  const std::string ps = std::to_string(p);
  const std::string over_t = t > 1 ? "/T" : "";
  std::vector<ActivationRow> rows;
  // Under tensor parallelism the vocabulary-parallel lookup keeps its local ids (i64) and which
  // tokens this rank holds (bool): 9 s b bytes.
  rows.push_back({"embed", sbh * p / seq_share + 8 * sr + (t > 1 ? 9 * sb : 0),
                  ps + " sbh" + (sp ? "/T" : "") + " + 8 s" + (t > 1 ? " + 9 sb" : "")});
  const BlockActivations k = block_activations(c.recompute, layout, a / t);
  std::string formula;
  auto term = [&](int64_t coefficient, const std::string& unit) {
    if (coefficient == 0) return;
    formula += (formula.empty() ? "" : " + ") + std::to_string(coefficient) + " " + unit;
  };
  if (t == 1) {
    term((k.whole_sbh + k.split_sbh) * p, "sbh");
  } else {
    term(k.whole_sbh * p, "sbh");
    term(k.split_sbh * p, "sbh/T");
  }
  term(k.statistics_sb, std::string("sb") + (sp ? "/T" : ""));
  term(k.logsumexp_asb, "asb" + over_t);
  const int64_t block = k.whole_sbh * p * sbh + k.split_sbh * p * sbh / t +
                        k.statistics_sb * sb / seq_share + k.logsumexp_asb * (a / t) * sb;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    rows.push_back({"h" + std::to_string(l), block, formula, paper_block_bytes(c, b, s, layout)});
  }
  rows.push_back({"ln_f", sbh * p / seq_share + 8 * sb / seq_share,
                  ps + " sbh" + (sp ? "/T" : "") + " + 8 sb" + (sp ? "/T" : "")});
  rows.push_back({"lm_head", sb * v / t * p, ps + " sbV" + over_t});
  // The cross-entropy keeps its probabilities and the targets (i64); the vocabulary-parallel one
  // also each token's target weight (f32).
  const int64_t per_token = t > 1 ? 12 : 8;
  rows.push_back({"loss", sb * v / t * p + per_token * sb + p,
                  ps + " sbV" + over_t + " + " + std::to_string(per_token) + " sb + " + ps});
  return rows;
}

}  // namespace cost
}  // namespace tessera
