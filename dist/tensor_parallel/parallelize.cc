#include "dist/tensor_parallel/parallelize.h"

#include "dist/tensor_parallel/column_parallel_linear.h"
#include "dist/tensor_parallel/row_parallel_linear.h"
#include "nn/causal_self_attention.h"

namespace tessera {
namespace dist {
namespace tensor_parallel {

namespace {

// The module that holds `path`'s last component as a direct child.
nn::Module& parent_of(nn::Module& model, const std::string& path, std::string* child_name) {
  const size_t dot = path.rfind('.');
  *child_name = dot == std::string::npos ? path : path.substr(dot + 1);
  if (dot == std::string::npos) return model;
  const std::string parent_path = path.substr(0, dot);
  for (const auto& [name, module] : model.named_modules()) {
    if (name == parent_path) return *module;
  }
  TS_FAIL("parallelize_module: the model has no module '", parent_path, "' (in '", path, "')");
}

std::shared_ptr<nn::Module> child_of(nn::Module& parent, const std::string& name,
                                     const std::string& path) {
  for (const auto& [child_name, child] : parent.named_children()) {
    if (child_name == name) return child;
  }
  TS_FAIL("parallelize_module: the model has no module '", path, "'");
}

}  // namespace

std::shared_ptr<nn::Module> module_at(nn::Module& model, const std::string& path) {
  std::string name;
  return child_of(parent_of(model, path, &name), name, path);
}

std::shared_ptr<nn::Module> replace_module_at(nn::Module& model, const std::string& path,
                                              std::shared_ptr<nn::Module> module) {
  std::string name;
  nn::Module& parent = parent_of(model, path, &name);
  child_of(parent, name, path);  // names the path when it is not there
  return parent.replace_module(name, std::move(module));
}

std::vector<std::shared_ptr<nn::Module>> parallelize_module(
    nn::Module& model, const std::shared_ptr<ProcessGroup>& group, const ParallelizePlan& plan) {
  TS_CHECK(group != nullptr, "parallelize_module: the tensor-parallel group is null");
  std::vector<std::shared_ptr<nn::Module>> out;
  for (const auto& [path, style] : plan) {
    std::string name;
    nn::Module& parent = parent_of(model, path, &name);
    const auto linear = std::dynamic_pointer_cast<nn::Linear>(child_of(parent, name, path));
    TS_CHECK(linear != nullptr, "parallelize_module: '", path, "' is a ",
             child_of(parent, name, path)->type_name(), ", not a Linear");
    std::shared_ptr<nn::Module> parallel;
    switch (style) {
      case Style::kColumnwise:
      case Style::kClassParallelHead:
        parallel = std::make_shared<ColumnParallelLinear>(*linear, group, false);
        break;
      case Style::kColumnwiseGathered:
        parallel = std::make_shared<ColumnParallelLinear>(*linear, group, true);
        break;
      case Style::kRowwise:
        parallel = std::make_shared<RowParallelLinear>(*linear, group, true);
        break;
      case Style::kColumnwiseHeads: {
        const auto* attention = dynamic_cast<const nn::CausalSelfAttention*>(&parent);
        TS_CHECK(attention != nullptr, "parallelize_module: '", path,
                 "' is split by heads (Style::kColumnwiseHeads), so it must be the c_attn of a "
                 "CausalSelfAttention, but its parent is a ", parent.type_name());
        parallel = ColumnParallelLinear::heads(*linear, group, attention->n_head());
        break;
      }
    }
    parallel->train(linear->is_training());
    parent.replace_module(name, parallel);
    out.push_back(parallel);
  }
  return out;
}

std::string last_linear_name(nn::Module& model) {
  std::string last;
  for (const auto& [name, module] : model.named_modules()) {
    if (dynamic_cast<nn::Linear*>(module) != nullptr) last = name;
  }
  TS_CHECK(!last.empty(), "last_linear_name: the model (", model.type_name(),
           ") has no Linear layer");
  return last;
}

}  // namespace tensor_parallel
}  // namespace dist
}  // namespace tessera
