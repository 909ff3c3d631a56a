#include "tools/explain/activation_table.h"

#include <cstdio>
#include <optional>

#include "cost/activation_memory.h"
#include "tensor/check.h"
#include "tools/explain/activation_measure.h"
#include "tools/explain/activation_measure_parallel.h"
#include "tools/explain/json_line.h"
#include "tools/explain/table.h"

namespace tessera {
namespace explain {

namespace {

std::string layout_name(const cost::SequenceLayout& l) {
  if (l.ranks() == 1) return "one process";
  std::string out;
  if (l.tensor_parallel > 1) {
    out = "T = " + std::to_string(l.tensor_parallel) + " tensor parallel";
    if (l.sequence_parallel) out += " with sequence parallelism";
  }
  if (l.context_parallel > 1) {
    out += (out.empty() ? "" : ", ") + std::string("C = ") + std::to_string(l.context_parallel) +
           " context parallel (ring attention)";
  }
  return out;
}

}  // namespace

void print_activations(ModelChoice& c, const cost::SequenceLayout& layout, bool json,
                       const std::shared_ptr<dist::ProcessGroup>& world) {
  const models::GPTConfig config = cost::gpt_config(c.name, c.input);
  const int64_t s = c.input.seq_len, b = c.batch;
  const auto predicted = cost::gpt_activations(config, b, s, c.setup.precision, layout);
  // Measured: here on one process, or rank 0's on the layout's ranks, or not at all.
  std::optional<std::vector<MeasuredActivation>> measured;
  if (layout.ranks() == 1) {
    measured = measure_activations(*c.model, c.input, b, c.setup.precision);
  } else if (world != nullptr && world->size() == layout.ranks()) {
    c.model.reset();  // each rank builds and splits its own
    measured = measure_activations_on_ranks(c.name, c.input, b, c.setup.precision, layout,
                                            world)[0];
  }
  if (world != nullptr && world->rank() != 0) return;
  TS_INTERNAL_ASSERT(!measured || predicted.size() == measured->size(), "activations: ",
                     predicted.size(), " predicted rows, ", measured->size(), " measured");
  const std::string precision = cost::precision_name(c.setup.precision);
  if (json) {
    for (size_t i = 0; i < predicted.size(); ++i) {
      const cost::ActivationRow& r = predicted[i];
      json::Object o(kJsonLine);
      o.add("model", c.name).add("precision", precision).add("batch", b).add("seq_len", s)
          .add("recompute", config.recompute.str()).add("tensor_parallel", layout.tensor_parallel)
          .add_raw("sequence_parallel", layout.sequence_parallel ? "true" : "false")
          .add("context_parallel", layout.context_parallel).add("layer", r.layer)
          .add("activation_bytes", r.bytes).add("formula", r.formula);
      if (measured) o.add("measured_activation_bytes", (*measured)[i].bytes);
      if (r.paper_bytes >= 0) o.add("paper_16bit_bytes", r.paper_bytes);
      std::printf("%s\n", o.str().c_str());
    }
    return;
  }
  std::printf("\nactivations per rank, kept from the forward for the backward: s = %lld tokens, "
              "b = %lld windows, h = %lld wide, a = %lld heads, V = %lld (padded), %s, recompute "
              "%s, %s\n"
              "(tessera: cost/activation_memory.h; paper: Korthikanti et al. 2022, s b h (34 + "
              "5 a s / h) in 16-bit on one rank, with dropout masks and the a s^2 scores tessera "
              "does not keep)\n",
              static_cast<long long>(s), static_cast<long long>(b),
              static_cast<long long>(config.n_embd), static_cast<long long>(config.n_head),
              static_cast<long long>(config.vocab_size), precision.c_str(),
              config.recompute.str().c_str(), layout_name(layout).c_str());
  Table t({"layer", "formula", "predicted", "measured", "paper (16-bit)"}, {0, 1});
  double total_predicted = 0, total_measured = 0;
  for (size_t i = 0; i < predicted.size(); ++i) {
    const cost::ActivationRow& r = predicted[i];
    t.add({r.layer, r.formula, megabytes(r.bytes), measured ? megabytes((*measured)[i].bytes) : "-",
           r.paper_bytes >= 0 ? megabytes(r.paper_bytes) : "-"});
    total_predicted += r.bytes;
    if (measured) total_measured += (*measured)[i].bytes;
  }
  t.add({"total", "", megabytes(total_predicted), measured ? megabytes(total_measured) : "-", ""});
  std::fputs(t.str().c_str(), stdout);
  if (!measured) {
    std::printf("(measured: start it on the layout's %d ranks, mpirun -np %d explain memory ...)\n",
                layout.ranks(), layout.ranks());
  }
}

}  // namespace explain
}  // namespace tessera
