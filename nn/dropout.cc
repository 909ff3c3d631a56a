#include "nn/dropout.h"

#include "autograd/functions.h"

namespace tessera {
namespace nn {

Dropout::Dropout(double p) : p_(p) {
  TS_CHECK(p >= 0 && p <= 1, "Dropout: p must be in [0, 1], got ", p);
}

std::string Dropout::extra_repr() const { return detail::str("p=", p_); }

Variable Dropout::forward(const Variable& x) { return dropout(x, p_, is_training()); }

}  // namespace nn
}  // namespace tessera
