#include "tools/explain/activation_table.h"

#include <cstdio>

#include "cost/activation_memory.h"
#include "tensor/check.h"
#include "tools/explain/activation_measure.h"
#include "tools/explain/json_line.h"
#include "tools/explain/table.h"

namespace tessera {
namespace explain {

void print_activations(ModelChoice& c, bool json) {
  const models::GPTConfig config = cost::gpt_config(c.name, c.input);
  const int64_t s = c.input.seq_len, b = c.batch;
  const auto predicted = cost::gpt_activations(config, b, s, c.setup.precision);
  const auto measured = measure_activations(*c.model, c.input, b, c.setup.precision);
  TS_INTERNAL_ASSERT(predicted.size() == measured.size(), "activations: ", predicted.size(),
                     " predicted rows, ", measured.size(), " measured");
  const std::string precision = cost::precision_name(c.setup.precision);
  if (json) {
    for (size_t i = 0; i < predicted.size(); ++i) {
      const cost::ActivationRow& r = predicted[i];
      json::Object o(kJsonLine);
      o.add("model", c.name).add("precision", precision).add("batch", b).add("seq_len", s)
          .add("recompute", config.recompute.str()).add("layer", r.layer).add("activation_bytes", r.bytes)
          .add("measured_activation_bytes", measured[i].bytes).add("formula", r.formula);
      if (r.paper_bytes >= 0) o.add("paper_16bit_bytes", r.paper_bytes);
      std::printf("%s\n", o.str().c_str());
    }
    return;
  }
  std::printf("\nactivations per rank, kept from the forward for the backward: s = %lld tokens, "
              "b = %lld windows, h = %lld wide, a = %lld heads, V = %lld (padded), %s, recompute %s\n"
              "(tessera: cost/activation_memory.h; paper: Korthikanti et al. 2022, s b h (34 + "
              "5 a s / h) in 16-bit, with dropout masks and the a s^2 scores tessera does not keep)\n",
              static_cast<long long>(s), static_cast<long long>(b),
              static_cast<long long>(config.n_embd), static_cast<long long>(config.n_head),
              static_cast<long long>(config.vocab_size), precision.c_str(),
              config.recompute.str().c_str());
  Table t({"layer", "formula", "predicted", "measured", "paper (16-bit)"}, {0, 1});
  double total_predicted = 0, total_measured = 0;
  for (size_t i = 0; i < predicted.size(); ++i) {
    const cost::ActivationRow& r = predicted[i];
    t.add({r.layer, r.formula, megabytes(r.bytes), megabytes(measured[i].bytes),
           r.paper_bytes >= 0 ? megabytes(r.paper_bytes) : "-"});
    total_predicted += r.bytes;
    total_measured += measured[i].bytes;
  }
  t.add({"total", "", megabytes(total_predicted), megabytes(total_measured), ""});
  std::fputs(t.str().c_str(), stdout);
}

}  // namespace explain
}  // namespace tessera
