// What a training setup stores per parameter: the precision of its parameters and the
// optimizer's moments, the two numbers the ZeRO paper's memory table is written in.
//
//   precision   parameter  gradient  master copy      optimizer   moments   K (bytes/param)
//   f32         4          4         -                sgd         4         4
//   mixed       2          2         4 (f32)          adam        8         8 + 4 = 12 (mixed)
//
// SGD means SGD with momentum (one f32 buffer; tools/train's default for ResNets), Adam two f32
// moments. So mixed precision with Adam is the paper's 2 + 2 + 12 bytes per parameter, f32 with
// Adam 4 + 4 + 8 and f32 with SGD 4 + 4 + 4.
#pragma once

#include <cstdint>
#include <string>

namespace tessera {
namespace cost {

enum class Precision { kF32, kMixed };
enum class OptimizerKind { kSGD, kAdam };

const char* precision_name(Precision p);         // "f32", "mixed"
const char* optimizer_name(OptimizerKind o);     // "sgd", "adam"
Precision parse_precision(const std::string& name);      // errors name the text
OptimizerKind parse_optimizer(const std::string& name);

struct TrainingSetup {
  Precision precision = Precision::kF32;
  OptimizerKind optimizer = OptimizerKind::kAdam;

  int64_t parameter_bytes() const { return precision == Precision::kMixed ? 2 : 4; }
  // The bytes of one gradient element that DDP all-reduces (its gradients' dtype).
  int64_t gradient_bytes() const { return parameter_bytes(); }
  int64_t moment_bytes() const { return optimizer == OptimizerKind::kAdam ? 8 : 4; }
  // K: the optimizer state per parameter, with the f32 master copy of half parameters.
  int64_t optimizer_bytes() const {
    return moment_bytes() + (precision == Precision::kMixed ? 4 : 0);
  }
};

}  // namespace cost
}  // namespace tessera
