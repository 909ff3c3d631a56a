#include "tools/train/offload.h"

#include "dist/zero/fully_sharded.h"
#include "dist/zero/offload/optimizer_swapper.h"
#include "dist/zero/zero_optimizer.h"

namespace tessera {
namespace train {

dist::Offload offload_of(const Config& c) {
  if (c.offload == "none") return dist::Offload();
  const dist::OffloadTier tier = dist::parse_offload_tier(c.offload_tier);
  return (c.offload == "all" ? dist::Offload().all(tier) : dist::Offload().optimizer(tier))
      .dir(c.offload_dir);
}

void report_offload(json::Object& summary, const optim::Optimizer& optimizer,
                    const dist::FullyShardedDataParallel* fsdp) {
  const dist::offload::OptimizerSwapper* swapper = nullptr;
  const dist::offload::SwappedVector* master = nullptr;
  if (const auto* zero = dynamic_cast<const dist::ZeroRedundancyOptimizer*>(&optimizer)) {
    swapper = zero->inner().swapper();
    master = zero->offloaded_master();
  } else if (const auto* grouped = dynamic_cast<const dist::zero::GroupedShardOptimizer*>(&optimizer)) {
    swapper = grouped->swapper();
  }
  if (swapper == nullptr) return;
  json::Object o;
  o.add("state", fsdp != nullptr && fsdp->parameter_store() != nullptr ? "all" : "optimizer");
  o.add("tier", dist::offload_tier_name(swapper->tier()));
  o.add("offloaded_bytes", swapper->offloaded_bytes());
  o.add("pieces", static_cast<int64_t>(swapper->pieces().size()));
  o.add("step_read_bytes", swapper->last_step_read());
  o.add("step_written_bytes", swapper->last_step_written());
  o.add("total_read_bytes", swapper->bytes_read());
  o.add("total_written_bytes", swapper->bytes_written());
  // ZeRO-1/2's f32 masters of f16/bf16 parameters: read before each step, written after it.
  if (master != nullptr) o.add("master_bytes", master->store().reserved_bytes());
  // --offload=all: ZeRO-3's parameter and gradient shards (totals since the start).
  const auto add_store = [&](const char* kind, const dist::offload::OffloadStore* store) {
    if (store == nullptr) return;
    const std::string k = kind;
    o.add(k + "_bytes", store->reserved_bytes());
    o.add(k + "_read_bytes", store->bytes_read());
    o.add(k + "_written_bytes", store->bytes_written());
  };
  if (fsdp != nullptr) {
    add_store("parameters", fsdp->parameter_store());
    add_store("gradients", fsdp->gradient_store());
  }
  summary.add_raw("offload", o.str());
}

}  // namespace train
}  // namespace tessera
