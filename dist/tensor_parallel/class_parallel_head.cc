#include "dist/tensor_parallel/class_parallel_head.h"

#include "dist/tensor_parallel/parallelize.h"

namespace tessera {
namespace dist {
namespace tensor_parallel {

ClassParallelHead parallelize_classifier(nn::Module& model,
                                         const std::shared_ptr<ProcessGroup>& group,
                                         const std::string& path) {
  const std::string name = path.empty() ? last_linear_name(model) : path;
  // parallelize_module checks that `name` is a Linear and makes a ColumnParallelLinear of it.
  auto linear = std::static_pointer_cast<ColumnParallelLinear>(
      parallelize_module(model, group, {{name, Style::kClassParallelHead}})[0]);
  return {linear, ClassParallelCrossEntropy(*linear)};
}

}  // namespace tensor_parallel
}  // namespace dist
}  // namespace tessera
