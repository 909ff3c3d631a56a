#include "nn/sequential.h"

namespace tessera {
namespace nn {

Sequential::Sequential(std::initializer_list<std::shared_ptr<Module>> layers) {
  for (const auto& layer : layers) push_back(layer);
}

void Sequential::push_back(std::shared_ptr<Module> layer) {
  push_back(std::to_string(size()), std::move(layer));
}

void Sequential::push_back(const std::string& name, std::shared_ptr<Module> layer) {
  register_module(name, std::move(layer));
}

const std::shared_ptr<Module>& Sequential::operator[](size_t i) const {
  TS_CHECK(i < size(), "Sequential: index ", i, " out of range for ", size(), " layers");
  return named_children()[i].second;
}

const std::string& Sequential::name_at(size_t i) const {
  TS_CHECK(i < size(), "Sequential: index ", i, " out of range for ", size(), " layers");
  return named_children()[i].first;
}

std::shared_ptr<Sequential> Sequential::slice(size_t begin, size_t end) const {
  TS_CHECK(begin <= end && end <= size(), "Sequential::slice: [", begin, ", ", end,
           ") out of range for ", size(), " layers");
  auto out = std::make_shared<Sequential>();
  for (size_t i = begin; i < end; ++i) out->push_back(name_at(i), (*this)[i]);
  out->train(is_training());
  return out;
}

Variable Sequential::forward(const Variable& x) {
  Variable h = x;
  for (const auto& [name, layer] : named_children()) h = (*layer)(h);
  return h;
}

}  // namespace nn
}  // namespace tessera
