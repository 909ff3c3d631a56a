#include "cost/activation_memory.h"

#include "tensor/check.h"

namespace tessera {
namespace cost {

BlockActivations block_activations(const models::Recompute& r) {
  using G = models::Recompute::Granularity;
  if (r.granularity == G::kFull) return {1, 0, 0};  // the block's input (its checkpoint's)
  BlockActivations k{17, 16, 4};
  if (r.granularity == G::kNone) return k;
  if (r.core_attn) {  // q, k, v (3) and the output (1) in the heads' layout, the output in the
    k.sbh -= 2;       // tokens' (1) and the logsumexp, for c_attn's output qkv (3)
    k.asb = 0;
  }
  if (r.layernorm) {  // ln_1's and ln_2's outputs and their statistics; their inputs stay
    k.sbh -= 2;
    k.sb = 0;
  }
  if (r.gelu) k.sbh -= 4;  // GELU's output; c_fc's output (its input) stays
  return k;
}

double paper_block_bytes(const models::GPTConfig& c, int64_t b, int64_t s) {
  const double sbh = static_cast<double>(s) * b * c.n_embd;
  const double attention = 5.0 * c.n_head * s / c.n_embd;
  using G = models::Recompute::Granularity;
  switch (c.recompute.granularity) {
    case G::kFull: return 2.0 * sbh;
    case G::kSelective: return sbh * (34.0 + (c.recompute.core_attn ? 0.0 : attention));
    case G::kNone: break;
  }
  return sbh * (34.0 + attention);
}

std::vector<ActivationRow> gpt_activations(const models::GPTConfig& c, int64_t b, int64_t s,
                                           Precision precision) {
  TS_CHECK(b >= 1 && s >= 1 && s <= c.context, "gpt_activations: batch ", b, " and ", s,
           " tokens (context ", c.context, ")");
  const int64_t p = precision == Precision::kMixed ? 2 : 4;
  const int64_t h = c.n_embd, a = c.n_head, v = c.vocab_size, sb = s * b, sbh = sb * h;
  const std::string ps = std::to_string(p);
  std::vector<ActivationRow> rows;
  rows.push_back({"embed", sbh * p + 8 * s, ps + " sbh + 8 s"});
  const BlockActivations block = block_activations(c.recompute);
  const std::string formula =
      std::to_string(block.sbh * p) + " sbh" +
      (block.sb > 0 ? " + " + std::to_string(block.sb) + " sb" : std::string()) +
      (block.asb > 0 ? " + " + std::to_string(block.asb) + " asb" : std::string());
  for (int64_t l = 0; l < c.n_layer; ++l) {
    rows.push_back({"h" + std::to_string(l), block.sbh * p * sbh + block.sb * sb + block.asb * a * sb,
                    formula, paper_block_bytes(c, b, s)});
  }
  rows.push_back({"ln_f", sbh * p + 8 * sb, ps + " sbh + 8 sb"});
  rows.push_back({"lm_head", sb * v * p, ps + " sbV"});
  rows.push_back({"loss", sb * v * p + 8 * sb + p, ps + " sbV + 8 sb + " + ps});
  return rows;
}

}  // namespace cost
}  // namespace tessera
