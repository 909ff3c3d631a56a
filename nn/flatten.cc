#include "nn/flatten.h"

#include "autograd/functions.h"

namespace tessera {
namespace nn {

Variable Flatten::forward(const Variable& x) { return flatten(x, start_dim_, end_dim_); }

}  // namespace nn
}  // namespace tessera
