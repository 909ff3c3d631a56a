// parallelize_classifier: TorchShard's recipe for a large classifier in one call on a model
// built as usual. Its classifier Linear becomes a ColumnParallelLinear whose logits stay split
// by class (parallelize_module's Style::kClassParallelHead), and the loss over those split
// logits comes with it, already knowing the group, this rank's classes and their number:
//
//   auto model = make_net();                                   // ..., Flatten, Linear "fc"
//   auto head = tensor_parallel::parallelize_classifier(*model, tp_group);   // the last Linear
//   Variable loss = head.loss((*model)(x), y);                 // ClassParallelCrossEntropy
//   Tensor predicted = head.loss.argmax((*model)(x));          // over all classes
//
// head.linear is the layer now in the model (its output_slice() is this rank's classes). For
// another reduction or label smoothing, make the loss from it:
// ClassParallelCrossEntropy(*head.linear, Reduction::kSum, 0.1).
#pragma once

#include <memory>
#include <string>

#include "dist/process_group.h"
#include "dist/tensor_parallel/class_parallel_cross_entropy.h"
#include "dist/tensor_parallel/column_parallel_linear.h"
#include "nn/module.h"

namespace tessera {
namespace dist {
namespace tensor_parallel {

struct ClassParallelHead {
  std::shared_ptr<ColumnParallelLinear> linear;  // the classifier, holding this rank's classes
  ClassParallelCrossEntropy loss;                // mean cross-entropy over its split logits
};

// `path` is the classifier's dotted name; empty means the model's last Linear
// (last_linear_name). Every rank of `group` makes the same call on the same model (no message
// is sent: each rank keeps its rows of the full Linear).
ClassParallelHead parallelize_classifier(nn::Module& model,
                                         const std::shared_ptr<ProcessGroup>& group,
                                         const std::string& path = "");

}  // namespace tensor_parallel
}  // namespace dist
}  // namespace tessera
