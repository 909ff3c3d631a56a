#include "dist/zero/memory_model.h"

#include <set>

#include "tensor/check.h"
#include "tensor/storage.h"

namespace tessera {
namespace dist {
namespace zero {

ModelStateBytes predicted_model_state(Sharding sharding, int64_t psi, int64_t param_bytes,
                                      int64_t moment_bytes, int ranks) {
  TS_CHECK(ranks >= 1 && psi >= 0 && param_bytes > 0 && moment_bytes >= 0,
           "predicted_model_state: psi = ", psi, ", param_bytes = ", param_bytes,
           ", moment_bytes = ", moment_bytes, ", ranks = ", ranks);
  const int64_t master = param_bytes < 4 ? 4 : 0;  // f32 master copy of half parameters
  const int64_t n = ranks;
  switch (sharding) {
    case Sharding::kNone:
      return {param_bytes * psi, param_bytes * psi, (moment_bytes + master) * psi};
    case Sharding::kStage1:
      return {param_bytes * psi, param_bytes * psi, (moment_bytes + 4) * psi / n};
    case Sharding::kStage2:
      return {param_bytes * psi, 4 * psi / n, (moment_bytes + 4) * psi / n};
    case Sharding::kStage3:
      return {4 * psi / n, 4 * psi / n, moment_bytes * psi / n};
  }
  return {};
}

namespace {

// Adds t's storage once: its allocated bytes, or zero when released.
void add_storage(const Tensor& t, std::set<const Storage*>& seen, int64_t& bytes) {
  if (!t.defined() || t.storage() == nullptr) return;
  const Storage* s = t.storage().get();
  if (!seen.insert(s).second) return;
  if (s->data() != nullptr) bytes += static_cast<int64_t>(s->nbytes());
}

}  // namespace

ModelStateBytes measured_model_state(const std::vector<Variable>& parameters,
                                     const optim::Optimizer& optimizer) {
  ModelStateBytes m;
  std::set<const Storage*> seen;
  for (const Variable& p : parameters) add_storage(p.data(), seen, m.parameters);
  for (const Variable& p : parameters) add_storage(p.grad(), seen, m.gradients);
  for (const Variable& p : optimizer.gradient_variables()) add_storage(p.grad(), seen, m.gradients);
  m.optimizer = optimizer.state_bytes();
  return m;
}

int64_t predicted_comm_bytes(Sharding sharding, int64_t elements, int64_t element_bytes,
                             int ranks) {
  if (ranks <= 1) return 0;
  const int64_t passes = sharding == Sharding::kStage3 ? 3 : 2;
  return passes * (ranks - 1) * elements * element_bytes / ranks;
}

}  // namespace zero
}  // namespace dist
}  // namespace tessera
