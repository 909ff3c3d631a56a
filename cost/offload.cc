#include "cost/offload.h"

#include "tensor/check.h"

namespace tessera {
namespace cost {

std::vector<OffloadRow> offload_rows(const std::vector<MemoryRow>& rows, const std::string& offload,
                                     int64_t psi, const TrainingSetup& setup, int ranks) {
  TS_CHECK(offload == "optimizer" || offload == "all", "--offload=", offload,
           ": expected optimizer or all (none: leave the flag out)");
  const int64_t m = setup.moment_bytes();
  const auto shard = [&](int64_t bytes) { return (psi * bytes + ranks - 1) / ranks; };
  const auto str = [](int64_t v) { return std::to_string(v); };
  std::vector<OffloadRow> out;
  for (const MemoryRow& r : rows) {
    const bool zero12 = r.strategy == "zero1" || r.strategy == "zero2";
    const bool zero3 = r.strategy == "zero3";
    if (!(zero3 || (zero12 && offload == "optimizer"))) continue;
    OffloadRow o;
    o.strategy = r.strategy;
    if (offload == "optimizer") {
      const int64_t per = m + (zero12 && setup.precision == Precision::kMixed ? 4 : 0);
      o.offloaded = shard(per);
      o.read_per_step = o.written_per_step = o.offloaded;
      o.formula = str(per) + " psi/N offloaded, read and written";
    } else {
      o.offloaded = shard(8 + m);
      o.read_per_step = shard(16 + m);
      o.written_per_step = shard(8 + m);
      o.formula = "(4 + 4 + " + str(m) + ") psi/N offloaded; read (3x4 + 4 + " + str(m) +
                  ") psi/N, written (4 + 4 + " + str(m) + ") psi/N";
    }
    o.resident = r.bytes.total() - o.offloaded;
    out.push_back(o);
  }
  return out;
}

}  // namespace cost
}  // namespace tessera
