#include "cost/compression.h"

#include <cstdio>

#include "cost/buckets.h"
#include "dist/compression/make_hook.h"
#include "dist/compression/powersgd.h"
#include "dist/compression/qsgd.h"
#include "tensor/check.h"

namespace tessera {
namespace cost {

namespace {

namespace dc = dist::compression;

// One ring all-reduce of k elements of 4 bytes: what one rank sends.
double all_reduce_bytes(int ranks, int64_t k) { return 2.0 * (ranks - 1) / ranks * 4.0 * k; }

// One rank's message for a bucket of n elements, as the compressor's header writes its format.
std::string message_formula(const dc::CompressionSpec& spec) {
  char s[96];
  if (spec.kind == "fp16" || spec.kind == "bf16") return "m = 2n";
  if (spec.kind == "randomk") std::snprintf(s, sizeof(s), "m = 4 ceil(%g n) (values)", spec.ratio);
  if (spec.kind == "topk") std::snprintf(s, sizeof(s), "m = 8 ceil(%g n) (index, value)", spec.ratio);
  if (spec.kind == "qsgd") {
    std::snprintf(s, sizeof(s), "m = 4 ceil(n / %lld) + ceil(%d n / 8) (norms, codes)",
                  static_cast<long long>(spec.qsgd_bucket), dc::QSGD(spec.levels).bits_per_element());
  }
  if (spec.kind == "sign") return "m = 4 + n/8";
  return s;
}

}  // namespace

std::vector<std::string> example_compressions() {
  return {"fp16", "bf16", "randomk:0.01", "topk:0.01", "qsgd:16", "sign", "powersgd:4"};
}

std::vector<Transfer> compressed_ddp_traffic(const ModelProfile& model, const std::string& compression,
                                             const TrafficOptions& o) {
  const dc::CompressionSpec spec = dc::parse_compression(compression);
  TS_CHECK(spec.kind != "none", "compressed_ddp_traffic: give a compressor, not 'none'");
  const int n = o.ranks;
  const std::vector<int64_t> numels = model.parameter_numels();
  const std::vector<std::vector<int64_t>> shapes = model.parameter_shapes();
  std::vector<int64_t> grad_bytes;
  for (int64_t numel : numels) grad_bytes.push_back(numel * 4);  // the hooks compress f32 buckets
  const std::vector<BucketPlan> buckets = assign_buckets(grad_bytes, o.first_bucket_mb, o.bucket_cap_mb);
  Transfer t;
  t.strategy = "ddp+" + compression;
  if (spec.kind == "powersgd") {
    const dc::PowerSGDOptions options = dc::PowerSGDOptions().matrix_approximation_rank(spec.rank);
    int64_t calls = 0;
    double bytes = 0;
    for (const BucketPlan& b : buckets) {
      std::vector<Shape> bucket_shapes;
      for (size_t i : b.parameters) bucket_shapes.push_back(shapes[i]);
      const dc::PowerSGDPlan plan = dc::plan_powersgd(bucket_shapes, options);
      for (int64_t k : {plan.uncompressed_numel, plan.p_numel, plan.q_numel}) {
        if (k == 0 || n == 1) continue;  // an empty all-reduce is not issued
        ++calls;
        bytes += all_reduce_bytes(n, k);
      }
    }
    t.collective = "all_reduce";
    t.calls = calls;
    t.bytes = bytes;
    t.formula = "2 (N-1)/N x 4 (U + P + Q) per bucket, rank " + std::to_string(spec.rank) +
                " (after start_powerSGD_iter)";
    return {t};
  }
  const std::unique_ptr<dc::Compressor> c = dc::make_compressor(spec);
  const bool adds = c->transport() == dc::Transport::kAllReduce;
  t.collective = adds ? "all_reduce" : "all_gather";
  for (const BucketPlan& b : buckets) {
    int64_t elements = 0;
    for (size_t i : b.parameters) elements += numels[i];
    if (n == 1) continue;
    ++t.calls;
    t.bytes += dc::bytes_sent(*c, elements, n);
  }
  t.formula = std::string(adds ? "2 (N-1)/N x m" : "(N-1) x m") + " per bucket, " +
              message_formula(spec);
  return {t};
}

std::vector<BucketCollective> compressed_bucket_collectives(const std::vector<int64_t>& numels,
                                                            const std::vector<std::vector<int64_t>>& shapes,
                                                            const std::string& compression, int ranks) {
  const dc::CompressionSpec spec = dc::parse_compression(compression);
  TS_CHECK(spec.kind != "none", "compressed_bucket_collectives: give a compressor, not 'none'");
  TS_CHECK(numels.size() == shapes.size(), "compressed_bucket_collectives: ", numels.size(),
           " parameters, ", shapes.size(), " shapes");
  std::vector<BucketCollective> out;
  if (spec.kind == "powersgd") {
    std::vector<Shape> bucket_shapes(shapes.begin(), shapes.end());
    const dc::PowerSGDPlan plan = dc::plan_powersgd(
        bucket_shapes, dc::PowerSGDOptions().matrix_approximation_rank(spec.rank));
    for (int64_t k : {plan.uncompressed_numel, plan.p_numel, plan.q_numel}) {
      if (k > 0) out.push_back({false, 4.0 * k});  // an empty all-reduce is not issued
    }
    return out;
  }
  const std::unique_ptr<dc::Compressor> c = dc::make_compressor(spec);
  int64_t n = 0;
  for (int64_t k : numels) n += k;
  const double m = static_cast<double>(c->message_bytes(n));
  if (c->transport() == dc::Transport::kAllReduce) return {{false, m}};
  return {{true, m * ranks}};
}

}  // namespace cost
}  // namespace tessera
