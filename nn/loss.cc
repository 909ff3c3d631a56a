#include "nn/loss.h"

namespace tessera {
namespace nn {

CrossEntropyLoss::CrossEntropyLoss(Reduction reduction, double label_smoothing)
    : reduction_(reduction), label_smoothing_(label_smoothing) {
  TS_CHECK(label_smoothing >= 0 && label_smoothing <= 1,
           "CrossEntropyLoss: label_smoothing must be in [0, 1], got ", label_smoothing);
}

}  // namespace nn
}  // namespace tessera
