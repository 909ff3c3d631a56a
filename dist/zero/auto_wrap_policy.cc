#include "dist/zero/auto_wrap_policy.h"

#include "tensor/check.h"

namespace tessera {
namespace dist {

WrapPolicy size_based_wrap_policy(int64_t min_num_params) {
  TS_CHECK(min_num_params >= 1, "size_based_wrap_policy: min_num_params must be at least 1, got ",
           min_num_params);
  return [min_num_params](const nn::Module&, int64_t unwrapped) { return unwrapped >= min_num_params; };
}

WrapPolicy layer_wrap_policy() {
  return [](const nn::Module& m, int64_t) { return !m.named_parameters(/*recurse=*/false).empty(); };
}

}  // namespace dist
}  // namespace tessera
