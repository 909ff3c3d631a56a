#include "tools/explain/activation_measure_parallel.h"

#include <optional>

#include "dist/context_parallel/parallelize_context.h"
#include "dist/context_parallel/sequence_split.h"
#include "dist/gather_bytes.h"
#include "dist/tensor_parallel/gpt_plan.h"
#include "dist/topology.h"
#include "models/gpt.h"
#include "tensor/allocator.h"
#include "tensor/check.h"

namespace tessera {
namespace explain {

namespace {

// "name=bytes;name=bytes;..." and back: a rank's figures through all_gather_bytes.
std::string encode(const std::vector<MeasuredActivation>& rows) {
  std::string out;
  for (const MeasuredActivation& r : rows) out += r.layer + "=" + std::to_string(r.bytes) + ";";
  return out;
}

std::vector<MeasuredActivation> decode(const std::string& text) {
  std::vector<MeasuredActivation> rows;
  size_t start = 0;
  while (start < text.size()) {
    const size_t eq = text.find('=', start), end = text.find(';', start);
    rows.push_back({text.substr(start, eq - start), std::stoll(text.substr(eq + 1, end - eq - 1))});
    start = end + 1;
  }
  return rows;
}

}  // namespace

std::vector<std::vector<MeasuredActivation>> measure_activations_on_ranks(
    const std::string& name, const cost::ModelInput& input, int64_t batch,
    cost::Precision precision, const cost::SequenceLayout& layout,
    const std::shared_ptr<dist::ProcessGroup>& world) {
  TS_CHECK(world->size() == layout.ranks(), "explain memory: T = ", layout.tensor_parallel,
           " x C = ", layout.context_parallel, " ranks measure on ", layout.ranks(),
           " ranks, started on ", world->size(), " (mpirun -np ", layout.ranks(), ")");
  TS_CHECK(layout.tensor_parallel == 1 || layout.context_parallel == 1, "explain memory: tensor "
           "and context parallelism together are not built (the train tool refuses them too)");
  const dist::Topology topology(world, 1, layout.tensor_parallel);
  std::shared_ptr<nn::Sequential> model = cost::build_model(name, input);  // the same seed
  const DType dtype = precision == cost::Precision::kMixed ? kBF16 : kF32;
  model->to(dtype);
  model->train();
  std::optional<dist::tensor_parallel::VocabParallelLM> vocabulary;
  if (layout.tensor_parallel > 1) {
    vocabulary.emplace(dist::tensor_parallel::parallelize_gpt(
        *model, topology.tensor_parallel_group(),
        dist::tensor_parallel::GPTParallelOptions().sequence_parallel(layout.sequence_parallel)));
  }
  // The windows' tokens, and under context parallelism this rank's chunks of them (head-tail).
  namespace cp = dist::context_parallel;
  Tensor ids = cost::example_batch(input, batch);
  if (layout.context_parallel > 1) {
    cp::parallelize_context(*model, world);
    ids = cp::rank_rows(ids, 1, world->rank(), world->size(), cp::SequenceSplit::kHeadTail);
  }
  Variable x(ids);
  std::vector<MeasuredActivation> mine;
  const Device cpu = Device::cpu();
  for (size_t i = 0; i < model->size(); ++i) {
    const int64_t before = memory_stats(cpu).current_bytes;
    x = (*(*model)[i])(x);
    mine.push_back({model->name_at(i), memory_stats(cpu).current_bytes - before});
  }
  const int64_t before = memory_stats(cpu).current_bytes;
  // The targets a training step holds beside the logits, as example_loss makes them.
  const Variable loss =
      vocabulary ? vocabulary->loss(x, ids) : models::lm_loss(x, ids.clone());
  mine.push_back({"loss", memory_stats(cpu).current_bytes - before});
  std::vector<std::vector<MeasuredActivation>> all;
  for (const std::string& text : dist::all_gather_bytes(encode(mine), *world)) {
    all.push_back(decode(text));
  }
  return all;
}

}  // namespace explain
}  // namespace tessera
