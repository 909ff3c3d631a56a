#include "dist/zero/offload/offload.h"

#include <utility>

#include "tensor/check.h"

namespace tessera {
namespace dist {

const char* offload_tier_name(OffloadTier tier) {
  switch (tier) {
    case OffloadTier::kDevice: return "device";
    case OffloadTier::kHost: return "host";
    case OffloadTier::kDisk: return "disk";
  }
  return "?";
}

OffloadTier parse_offload_tier(const std::string& name) {
  for (OffloadTier t : {OffloadTier::kDevice, OffloadTier::kHost, OffloadTier::kDisk}) {
    if (name == offload_tier_name(t)) return t;
  }
  TS_FAIL("offload tier '", name, "' is not one of device, host, disk");
}

void Offload::validate(const char* who) const {
  for (const auto& [kind, tier] : {std::pair<const char*, OffloadTier>{"optimizer state", optimizer_},
                                    {"parameters", params_}, {"gradients", gradients_}}) {
    TS_CHECK(tier != OffloadTier::kDisk || !dir_.empty(), who, ": the disk tier holds the ",
             kind, " but no directory was given (Offload().dir(path))");
  }
  TS_CHECK(!shards() || optimizer_ != OffloadTier::kDevice, who, ": parameters (",
           offload_tier_name(params_), ") and gradients (", offload_tier_name(gradients_),
           ") are offloaded but the optimizer state stays on the device: offload it too "
           "(Offload().optimizer(tier)); the step streams each unit's shards through memory "
           "with their state");
  TS_CHECK(piece_numel_ > 0 && piece_numel_ % 1024 == 0, who, ": piece_numel must be a positive "
           "multiple of 1024 (whole 4 KiB blocks of f32), got ", piece_numel_);
  TS_CHECK(io_threads_ >= 1, who, ": io_threads must be at least 1, got ", io_threads_);
}

}  // namespace dist
}  // namespace tessera
