#include "cost/model_profile.h"

#include <numeric>

namespace tessera {
namespace cost {

int64_t LayerProfile::parameters() const {
  return std::accumulate(parameter_numels.begin(), parameter_numels.end(), int64_t{0});
}

int64_t ModelProfile::parameters() const {
  int64_t psi = 0;
  for (const LayerProfile& l : layers) psi += l.parameters();
  return psi;
}

double ModelProfile::forward_seconds() const {
  double s = 0;
  for (const LayerProfile& l : layers) s += l.forward_seconds;
  return s;
}

double ModelProfile::backward_seconds() const {
  double s = 0;
  for (const LayerProfile& l : layers) s += l.backward_seconds;
  return s;
}

std::vector<int64_t> ModelProfile::parameter_numels() const {
  std::vector<int64_t> out;
  for (const LayerProfile& l : layers) out.insert(out.end(), l.parameter_numels.begin(), l.parameter_numels.end());
  return out;
}

std::vector<std::vector<int64_t>> ModelProfile::parameter_shapes() const {
  std::vector<std::vector<int64_t>> out;
  for (const LayerProfile& l : layers) {
    for (size_t i = 0; i < l.parameter_numels.size(); ++i) {
      out.push_back(i < l.parameter_shapes.size() ? l.parameter_shapes[i]
                                                  : std::vector<int64_t>{l.parameter_numels[i]});
    }
  }
  return out;
}

std::vector<size_t> ModelProfile::parameter_layers() const {
  std::vector<size_t> out;
  for (size_t i = 0; i < layers.size(); ++i) out.insert(out.end(), layers[i].parameter_numels.size(), i);
  return out;
}

}  // namespace cost
}  // namespace tessera
