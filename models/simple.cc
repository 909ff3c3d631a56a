#include "models/simple.h"

#include "nn/nn.h"

namespace tessera {
namespace models {

std::shared_ptr<nn::Sequential> LogisticRegression(int64_t in_features, int64_t classes) {
  auto model = std::make_shared<nn::Sequential>();
  model->push_back("flatten", std::make_shared<nn::Flatten>());
  model->push_back("fc", std::make_shared<nn::Linear>(in_features, classes));
  return model;
}

std::shared_ptr<nn::Sequential> MLP(int64_t in_features, int64_t hidden, int64_t classes) {
  auto model = std::make_shared<nn::Sequential>();
  model->push_back("flatten", std::make_shared<nn::Flatten>());
  model->push_back("fc1", std::make_shared<nn::Linear>(in_features, hidden));
  model->push_back("relu", std::make_shared<nn::ReLU>());
  model->push_back("fc2", std::make_shared<nn::Linear>(hidden, classes));
  return model;
}

}  // namespace models
}  // namespace tessera
