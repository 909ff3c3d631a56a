// A layer's check that its parameter holds its values before its forward reads them.
//
// dist::FullyShardedDataParallel (ZeRO-3) releases a unit's parameters to shape [0] between
// forwards and gathers them back in the unit's forward hooks, so layer->forward(x), which skips
// the hooks, would compute with an empty weight. The layer says so instead (Linear and Conv2d
// write the same message out in their forwards).
#pragma once

#include <string>

#include "autograd/variable.h"
#include "tensor/check.h"

namespace tessera {
namespace detail {

inline void check_gathered(const Variable& parameter, const Shape& expected,
                           const std::string& layer) {
  TS_CHECK(parameter.shape() == expected, layer, ": its parameter has shape ", parameter.shape(),
           ", expected ", expected, ": FullyShardedDataParallel released it and gathers it back "
           "only in the layer's forward hooks; call the layer as (*layer)(x), which runs them, "
           "not layer->forward(x)");
}

}  // namespace detail
}  // namespace tessera
