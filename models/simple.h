// The small models: logistic regression (softmax regression) and a one-hidden-layer MLP, for
// 28x28 grey images by default. Both are Sequentials starting with Flatten.
#pragma once

#include <memory>

#include "nn/sequential.h"

namespace tessera {
namespace models {

// Flatten -> Linear(in, classes).
std::shared_ptr<nn::Sequential> LogisticRegression(int64_t in_features = 784,
                                                   int64_t classes = 10);
// Flatten -> Linear(in, hidden) -> ReLU -> Linear(hidden, classes).
std::shared_ptr<nn::Sequential> MLP(int64_t in_features = 784, int64_t hidden = 256,
                                    int64_t classes = 10);

}  // namespace models
}  // namespace tessera
