#include "tools/train/compression_report.h"

#include <algorithm>

#include "dist/compression/compression_hook.h"
#include "dist/compression/make_hook.h"
#include "dist/compression/powersgd.h"
#include "tools/json/json_writer.h"

namespace tessera {
namespace train {

namespace {

// The formula's bytes per step for one bucket of the uncompressed all-reduce's `all` bytes.
double theory_bytes(const dist::CommunicationHook& hook, const dist::GradBucket& b, int n,
                    int64_t steps, double all) {
  double theory = 0;
  if (const auto* c = dynamic_cast<const dist::compression::CompressionHook*>(&hook)) {
    theory += dist::compression::bytes_sent(c->compressor(), b.buffer.numel(), n);
  }
  if (const auto* powersgd = dynamic_cast<const dist::compression::PowerSGDHook*>(&hook)) {
    // Plain all-reduces for the first start_powerSGD_iter steps, then U + P + Q elements.
    const double compressed = 2.0 * (n - 1) / n * 4.0 *
        static_cast<double>(dist::compression::plan_powersgd(b, powersgd->options()).wire_numel());
    const double plain = static_cast<double>(
        std::min<int64_t>(steps, powersgd->options().start_powerSGD_iter()));
    theory += steps > 0 ? (plain * all + (steps - plain) * compressed) / steps : compressed;
  }
  return theory;
}

}  // namespace

std::string compression_json(const dist::CommunicationHook& hook,
                             const std::vector<dist::GradBucket>& buckets, int ranks,
                             int64_t steps, int64_t bucket_bytes) {
  const int n = ranks;
  double uncompressed = 0, theory = 0;
  for (const dist::GradBucket& b : buckets) {
    const double all = 2.0 * (n - 1) / n * 4.0 * static_cast<double>(b.buffer.numel());
    uncompressed += all;
    theory += theory_bytes(hook, b, n, steps, all);
  }
  const double measured = steps > 0 ? static_cast<double>(bucket_bytes) / steps : 0.0;
  return json::Object()
      .add("name", hook.name())
      .add("bytes_per_step", measured)
      .add("bytes_per_step_uncompressed", uncompressed)
      .add("ratio", uncompressed > 0 ? measured / uncompressed : 0.0)
      .add("ratio_theory", uncompressed > 0 ? theory / uncompressed : 0.0)
      .str();
}

}  // namespace train
}  // namespace tessera
