#include "dist/compression/make_hook.h"

#include <cstdlib>

#include "dist/compression/compression_hook.h"
#include "dist/compression/error_feedback.h"
#include "dist/compression/half_precision.h"
#include "dist/compression/powersgd.h"
#include "dist/compression/qsgd.h"
#include "dist/compression/random_k.h"
#include "dist/compression/sign.h"
#include "dist/compression/top_k.h"
#include "tensor/check.h"

namespace tessera {
namespace dist {
namespace compression {

namespace {

double parse_number(const std::string& text, const std::string& value) {
  char* end = nullptr;
  const double v = std::strtod(value.c_str(), &end);
  TS_CHECK(!value.empty() && end != nullptr && *end == '\0', "compression '", text,
           "': '", value, "' is not a number");
  return v;
}

}  // namespace

CompressionSpec parse_compression(const std::string& text) {
  CompressionSpec spec;
  const size_t colon = text.find(':');
  spec.kind = text.substr(0, colon);
  const std::string arg = colon == std::string::npos ? "" : text.substr(colon + 1);
  const bool takes_arg =
      spec.kind == "topk" || spec.kind == "randomk" || spec.kind == "qsgd" || spec.kind == "powersgd";
  TS_CHECK(spec.kind == "none" || spec.kind == "fp16" || spec.kind == "bf16" || takes_arg ||
               spec.kind == "sign",
           "compression '", text, "': expected none, fp16, bf16, topk:RATIO, randomk:RATIO, "
           "qsgd:LEVELS[:BUCKET], sign or powersgd:RANK");
  TS_CHECK(takes_arg == (colon != std::string::npos), "compression '", text, "': ",
           takes_arg ? spec.kind + " needs a value (" + spec.kind +
                           (spec.kind == "qsgd"       ? ":LEVELS[:BUCKET])"
                            : spec.kind == "powersgd" ? ":RANK)"
                                                      : ":RATIO)")
                     : spec.kind + " takes no value");
  if (spec.kind == "topk" || spec.kind == "randomk") {
    spec.ratio = parse_number(text, arg);
    TS_CHECK(spec.ratio > 0 && spec.ratio <= 1, "compression '", text, "': the ratio must be in "
             "(0, 1], got ", spec.ratio);
  } else if (spec.kind == "qsgd") {
    // LEVELS[:BUCKET]
    const size_t second = arg.find(':');
    const std::string levels_text = arg.substr(0, second);
    const double levels = parse_number(text, levels_text);
    TS_CHECK(levels >= 1 && levels <= (1 << 20) && levels == static_cast<int>(levels),
             "compression '", text, "': the levels must be an integer in [1, 2^20], got ",
             levels_text);
    spec.levels = static_cast<int>(levels);
    if (second != std::string::npos) {
      const std::string bucket_text = arg.substr(second + 1);
      const double bucket = parse_number(text, bucket_text);
      TS_CHECK(bucket >= 1 && bucket <= (1 << 30) && bucket == static_cast<int64_t>(bucket),
               "compression '", text, "': the bucket (entries per norm) must be an integer in "
               "[1, 2^30], got ", bucket_text);
      spec.qsgd_bucket = static_cast<int64_t>(bucket);
    }
  } else if (spec.kind == "powersgd") {
    const double rank = parse_number(text, arg);
    TS_CHECK(rank >= 1 && rank <= 1024 && rank == static_cast<int>(rank), "compression '", text,
             "': the rank must be an integer in [1, 1024], got ", arg);
    spec.rank = static_cast<int>(rank);
  }
  return spec;
}

std::unique_ptr<Compressor> make_compressor(const CompressionSpec& spec, uint64_t seed) {
  if (spec.kind == "none") return nullptr;
  if (spec.kind == "fp16") return std::make_unique<HalfPrecision>(kF16);
  if (spec.kind == "bf16") return std::make_unique<HalfPrecision>(kBF16);
  if (spec.kind == "topk") return std::make_unique<TopK>(spec.ratio);
  if (spec.kind == "randomk") return std::make_unique<RandomK>(spec.ratio, seed);
  if (spec.kind == "qsgd") return std::make_unique<QSGD>(spec.levels, seed, spec.qsgd_bucket);
  if (spec.kind == "sign") return std::make_unique<Sign>();
  TS_CHECK(spec.kind != "powersgd", "make_compressor: PowerSGD is a communication hook of its own "
           "(make_compression_hook), not a per-bucket compressor");
  TS_FAIL("make_compressor: unknown compression '", spec.kind, "'");
}

std::shared_ptr<CommunicationHook> make_compression_hook(const CompressionSpec& spec,
                                                         std::optional<bool> error_feedback,
                                                         uint64_t seed) {
  if (spec.kind == "powersgd") {
    return std::make_shared<PowerSGDHook>(PowerSGDOptions()
                                              .matrix_approximation_rank(spec.rank)
                                              .start_powerSGD_iter(spec.powersgd_start_iter)
                                              .use_error_feedback(error_feedback.value_or(true))
                                              .random_seed(seed));
  }
  std::unique_ptr<Compressor> c = make_compressor(spec, seed);
  if (c == nullptr) return nullptr;
  if (error_feedback.value_or(!c->unbiased())) c = std::make_unique<ErrorFeedback>(std::move(c));
  return std::make_shared<CompressionHook>(std::move(c));
}

double bytes_sent(const Compressor& c, int64_t n, int world) {
  const double m = static_cast<double>(c.message_bytes(n));
  return c.transport() == Transport::kAllReduce ? 2.0 * (world - 1) / world * m : (world - 1) * m;
}

double bytes_ratio(const Compressor& c, int64_t n, int world) {
  return bytes_sent(c, n, world) / (2.0 * (world - 1) / world * 4.0 * static_cast<double>(n));
}

}  // namespace compression
}  // namespace dist
}  // namespace tessera
