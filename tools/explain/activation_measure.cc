#include "tools/explain/activation_measure.h"

#include "tensor/allocator.h"

namespace tessera {
namespace explain {

std::vector<MeasuredActivation> measure_activations(nn::Sequential& model,
                                                    const cost::ModelInput& input, int64_t batch,
                                                    cost::Precision precision) {
  const DType dtype = precision == cost::Precision::kMixed ? kBF16 : kF32;
  model.to(dtype);
  model.train();
  const Tensor ids = cost::example_batch(input, batch);
  Variable x(input.text() ? ids : ids.to(dtype));
  std::vector<MeasuredActivation> out;
  const Device cpu = Device::cpu();
  for (size_t i = 0; i < model.size(); ++i) {
    const int64_t before = memory_stats(cpu).current_bytes;
    x = model[i]->forward(x);
    out.push_back({model.name_at(i), memory_stats(cpu).current_bytes - before});
  }
  const int64_t before = memory_stats(cpu).current_bytes;
  const Variable loss = cost::example_loss(input, x, batch);
  out.push_back({"loss", memory_stats(cpu).current_bytes - before});
  return out;
}

}  // namespace explain
}  // namespace tessera
