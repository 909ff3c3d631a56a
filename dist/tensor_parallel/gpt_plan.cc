#include "dist/tensor_parallel/gpt_plan.h"

#include <string>

#include "dist/tensor_parallel/column_parallel_linear.h"
#include "dist/tensor_parallel/row_parallel_linear.h"
#include "dist/tensor_parallel/sequence_parallel.h"
#include "dist/tensor_parallel/sequence_parallel_position_embedding.h"
#include "nn/causal_self_attention.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "tensor/check.h"

namespace tessera {
namespace dist {
namespace tensor_parallel {

namespace {

bool has_linear_child(const nn::Module& module, const std::string& name) {
  for (const auto& [child_name, child] : module.named_children()) {
    if (child_name == name) return dynamic_cast<const nn::Linear*>(child.get()) != nullptr;
  }
  return false;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

ParallelizePlan gpt_plan(nn::Module& model) {
  ParallelizePlan plan;
  for (const auto& [path, module] : model.named_modules()) {
    const std::string prefix = path.empty() ? "" : path + ".";
    if (dynamic_cast<const nn::CausalSelfAttention*>(module) != nullptr) {
      plan.push_back({prefix + "c_attn", Style::kColumnwiseHeads});
      plan.push_back({prefix + "c_proj", Style::kRowwise});
    } else if ((path == "mlp" || ends_with(path, ".mlp")) && has_linear_child(*module, "c_fc") &&
               has_linear_child(*module, "c_proj")) {
      plan.push_back({prefix + "c_fc", Style::kColumnwise});
      plan.push_back({prefix + "c_proj", Style::kRowwise});
    }
  }
  TS_CHECK(!plan.empty(), "gpt_plan: the model (", model.type_name(),
           ") has no CausalSelfAttention and no mlp with Linears c_fc and c_proj");
  return plan;
}

VocabParallelLM parallelize_vocabulary(nn::Module& model,
                                       const std::shared_ptr<ProcessGroup>& group,
                                       const std::string& embedding, const std::string& head) {
  TS_CHECK(group != nullptr, "parallelize_vocabulary: the tensor-parallel group is null");
  const std::shared_ptr<nn::Module> table = module_at(model, embedding);
  const auto full = std::dynamic_pointer_cast<nn::Embedding>(table);
  TS_CHECK(full != nullptr, "parallelize_vocabulary: '", embedding, "' is a ", table->type_name(),
           ", not an Embedding");
  const std::shared_ptr<nn::Module> projection = module_at(model, head);
  TS_CHECK(projection->parameters().empty(), "parallelize_vocabulary: '", head, "' is a ",
           projection->type_name(), " with parameters of its own, not an output projection ",
           "tied to '", embedding, "'");
  auto wte = std::make_shared<VocabParallelEmbedding>(*full, group);
  auto lm_head = std::make_shared<VocabParallelLMHead>(wte);
  wte->train(full->is_training());
  lm_head->train(projection->is_training());
  replace_module_at(model, embedding, wte);
  replace_module_at(model, head, lm_head);
  return {wte, lm_head, lm_head->loss()};
}

VocabParallelLM parallelize_gpt(nn::Module& model, const std::shared_ptr<ProcessGroup>& group,
                                const GPTParallelOptions& options,
                                const std::string& position_embedding) {
  const std::vector<std::shared_ptr<nn::Module>> layers =
      parallelize_module(model, group, gpt_plan(model));
  VocabParallelLM vocabulary = parallelize_vocabulary(model, group);
  if (!options.sequence_parallel()) return vocabulary;

  for (const std::shared_ptr<nn::Module>& layer : layers) {
    if (auto column = std::dynamic_pointer_cast<ColumnParallelLinear>(layer)) {
      column->set_sequence_parallel(true);
    } else if (auto row = std::dynamic_pointer_cast<RowParallelLinear>(layer)) {
      row->set_sequence_parallel(true);
    }
  }
  vocabulary.wte->set_sequence_parallel(true);
  vocabulary.lm_head->set_sequence_parallel(true);
  const std::shared_ptr<nn::Module> positions = module_at(model, position_embedding);
  const auto wpe = std::dynamic_pointer_cast<nn::Embedding>(positions);
  TS_CHECK(wpe != nullptr, "parallelize_gpt: sequence parallelism adds the position embedding '",
           position_embedding, "' on each rank's tokens, but it is a ", positions->type_name(),
           ", not an Embedding");
  auto sharded = std::make_shared<SequenceParallelPositionEmbedding>(*wpe, group);
  sharded->train(wpe->is_training());
  replace_module_at(model, position_embedding, sharded);
  sum_gradients_over_sequence_parallel_group(sequence_parallel_parameters(model), group);
  return vocabulary;
}

}  // namespace tensor_parallel
}  // namespace dist
}  // namespace tessera
