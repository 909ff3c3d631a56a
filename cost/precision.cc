#include "cost/precision.h"

#include "tensor/check.h"

namespace tessera {
namespace cost {

const char* precision_name(Precision p) { return p == Precision::kMixed ? "mixed" : "f32"; }

const char* optimizer_name(OptimizerKind o) { return o == OptimizerKind::kAdam ? "adam" : "sgd"; }

Precision parse_precision(const std::string& name) {
  if (name == "f32") return Precision::kF32;
  TS_CHECK(name == "mixed", "unknown precision '", name, "' (expected f32 or mixed)");
  return Precision::kMixed;
}

OptimizerKind parse_optimizer(const std::string& name) {
  if (name == "sgd") return OptimizerKind::kSGD;
  TS_CHECK(name == "adam", "unknown optimizer '", name, "' (expected sgd or adam)");
  return OptimizerKind::kAdam;
}

}  // namespace cost
}  // namespace tessera
