// The compressors by name, as the train tool spells them, and the DDP hook for one:
//
//   none | fp16 | bf16 | topk:RATIO | randomk:RATIO | qsgd:LEVELS[:BUCKET] | sign | powersgd:RANK
//
// (qsgd's BUCKET: entries per norm, 512 when left out, qsgd.h.)
//
//   auto hook = compression::make_compression_hook(compression::parse_compression("topk:0.01"));
//   ddp.register_comm_hook(hook);               // error feedback on: top-k is biased
//
// Error feedback defaults to on for the biased compressors (top-k, sign, PowerSGD: its own,
// PyTorch's) and off for the unbiased ones (fp16/bf16 rounding, random-k, QSGD), where it is
// not needed to converge.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "dist/ddp/comm_hooks.h"
#include "dist/compression/compressor.h"
#include "dist/compression/qsgd.h"

namespace tessera {
namespace dist {
namespace compression {

struct CompressionSpec {
  std::string kind = "none";  // none, fp16, bf16, topk, randomk, qsgd, sign, powersgd
  double ratio = 0;           // topk, randomk: in (0, 1]
  int levels = 0;             // qsgd: >= 1
  int64_t qsgd_bucket = kQsgdBucket;  // qsgd: entries per norm, >= 1
  int rank = 0;               // powersgd: the matrix approximation rank, >= 1
  int64_t powersgd_start_iter = 1000;  // powersgd: plain all-reduce before (PyTorch's default)
};

// Errors name the text and what was wrong with it.
CompressionSpec parse_compression(const std::string& text);
// nullptr for "none"; PowerSGD is a hook of its own, not a Compressor (an error here).
std::unique_ptr<Compressor> make_compressor(const CompressionSpec& spec, uint64_t seed = 0);
// nullptr for "none"; `error_feedback` unset: on for biased compressors.
std::shared_ptr<CommunicationHook> make_compression_hook(const CompressionSpec& spec,
                                                         std::optional<bool> error_feedback = std::nullopt,
                                                         uint64_t seed = 0);

// Bytes sent per rank for one bucket of n f32 elements on N ranks, and the ratio to an
// uncompressed ring all-reduce (2 (N-1)/N 4n): all-reduce transport 2 (N-1)/N m, all-gather
// (N-1) m.
double bytes_sent(const Compressor& c, int64_t n, int world);
double bytes_ratio(const Compressor& c, int64_t n, int world);

}  // namespace compression
}  // namespace dist
}  // namespace tessera
