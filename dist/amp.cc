#include "dist/amp.h"

#include "dist/device_groups.h"

namespace tessera {
namespace dist {

optim::FoundInfReduction found_inf_all_reduce(std::shared_ptr<ProcessGroup> group) {
  TS_CHECK(group != nullptr, "found_inf_all_reduce: the process group is null");
  return [group = std::move(group)](const Tensor& found_inf) {
    group_for_device(group, found_inf.device())->all_reduce(found_inf, ReduceOp::kMax)->wait();
  };
}

}  // namespace dist
}  // namespace tessera
