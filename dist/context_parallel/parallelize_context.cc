#include "dist/context_parallel/parallelize_context.h"

#include <string>
#include <vector>

#include "tensor/check.h"

namespace tessera {
namespace dist {
namespace context_parallel {

int parallelize_context(nn::Module& model, const std::shared_ptr<ProcessGroup>& group,
                        const RingAttentionOptions& options, ContextParallelAlgorithm algorithm) {
  TS_CHECK(group != nullptr, "parallelize_context: the context-parallel group is null");
  bool embedding = false;
  for (const auto& [name, child] : model.named_children()) {
    if (name == "embed" && child->type_name() == "GPTEmbedding") embedding = true;
  }
  TS_CHECK(embedding,
           "parallelize_context: context parallelism runs on a GPT (models::GPT: "
           "an 'embed' GPTEmbedding and blocks with an 'attn'); this model is a ",
           model.type_name(), " without one");
  // Collect first: replacing changes the module tree being walked.
  std::vector<nn::Module*> parents;
  for (const auto& [path, module] : model.named_modules()) {
    for (const auto& [name, child] : module->named_children()) {
      if (name == "attn" && dynamic_cast<nn::CausalSelfAttention*>(child.get()) != nullptr) {
        parents.push_back(module);
      }
    }
  }
  TS_CHECK(!parents.empty(), "parallelize_context: the ", model.type_name(),
           " has no block with an 'attn' CausalSelfAttention (already parallelized?)");
  for (nn::Module* parent : parents) {
    std::shared_ptr<nn::Module> attn;
    for (const auto& [name, child] : parent->named_children()) {
      if (name == "attn") attn = child;
    }
    parent->replace_module(
        "attn", std::make_shared<ContextParallelAttention>(
                    dynamic_cast<const nn::CausalSelfAttention&>(*attn), group, options, algorithm));
  }
  std::shared_ptr<nn::Module> embed;
  for (const auto& [name, child] : model.named_children()) {
    if (name == "embed") embed = child;
  }
  model.replace_module("embed",
                       std::make_shared<ContextParallelEmbedding>(*embed, group, options.split_));
  return static_cast<int>(parents.size());
}

}  // namespace context_parallel
}  // namespace dist
}  // namespace tessera
