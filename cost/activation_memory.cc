#include "cost/activation_memory.h"

#include "tensor/check.h"

namespace tessera {
namespace cost {

std::vector<ActivationRow> gpt_activations(const models::GPTConfig& c, int64_t b, int64_t s,
                                           Precision precision) {
  TS_CHECK(b >= 1 && s >= 1 && s <= c.context, "gpt_activations: batch ", b, " and ", s,
           " tokens (context ", c.context, ")");
  const int64_t p = precision == Precision::kMixed ? 2 : 4;
  const int64_t h = c.n_embd, a = c.n_head, v = c.vocab_size, sb = s * b, sbh = sb * h;
  const std::string ps = std::to_string(p);
  std::vector<ActivationRow> rows;
  rows.push_back({"embed", sbh * p + 8 * s, ps + " sbh + 8 s"});
  const double paper = static_cast<double>(sbh) * (34.0 + 5.0 * a * s / h);
  for (int64_t l = 0; l < c.n_layer; ++l) {
    rows.push_back({"h" + std::to_string(l), 17 * sbh * p + 16 * sb + 4 * a * sb,
                    std::to_string(17 * p) + " sbh + 16 sb + 4 asb", paper});
  }
  rows.push_back({"ln_f", sbh * p + 8 * sb, ps + " sbh + 8 sb"});
  rows.push_back({"lm_head", sb * v * p, ps + " sbV"});
  rows.push_back({"loss", sb * v * p + 8 * sb + p, ps + " sbV + 8 sb + " + ps});
  return rows;
}

}  // namespace cost
}  // namespace tessera
