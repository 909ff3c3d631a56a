// What DDP's gradient compression (dist/compression/) sends per step: the bytes of each
// compressor's messages for the model's real buckets, as the byte ledger counts them.
//
// DDP's buckets (cost/buckets.h) of n f32 elements each; per bucket, N ranks:
//
//   fp16, bf16, random-k   messages add up: one ring all-reduce of the message m,
//                          2 (N-1)/N m bytes (fp16/bf16: m = 2n; random-k: 4 ceil(r n), the
//                          indices drawn alike on every rank, so only values travel)
//   top-k, QSGD, sign      messages do not add: one ring all-gather, (N-1) m bytes
//                          (top-k: 8 ceil(r n), an index and a value each; QSGD: a 4-byte norm
//                          per 512 entries + the packed codes; sign: 4 + n/8), growing with N
//   PowerSGD rank r        up to three all-reduces, of the uncompressed tensors (U elements),
//                          P (sum of rows_m r_m) and Q (sum of cols_m r_m), r_m = min(rows_m,
//                          cols_m, r), a matrix compressed only when r_m (rows + cols) x 2 <
//                          rows x cols: about 2 (N-1)/N x 4 (U + P + Q) bytes (exact when each
//                          count divides by N); before start_powerSGD_iter DDP's own all-reduce
//
// Each figure comes from the compressor itself (dist::compression::bytes_sent: its wire
// format's message_bytes) and PowerSGD's own plan (plan_powersgd), so the model and the hooks
// cannot disagree on a format.
#pragma once

#include <string>
#include <vector>

#include "cost/model_profile.h"
#include "cost/traffic.h"

namespace tessera {
namespace cost {

// The compressors explain shows under --compression=all: one of each kind.
std::vector<std::string> example_compressions();

// One row, its collective's, for DDP under
// `compression` (as the train tool spells it: "topk:0.01", "powersgd:4"; errors name it), on
// o.ranks ranks with o's buckets. Transfer::strategy is "ddp+<compression>".
std::vector<Transfer> compressed_ddp_traffic(const ModelProfile& model, const std::string& compression,
                                             const TrafficOptions& o);

// The collectives DDP issues for one f32 bucket of these parameters (element counts and shapes)
// under `compression` on `ranks` ranks, for the step-time model (cost/scaling.h): an all-reduce
// of `bytes` (messages that add up: fp16/bf16, random-k, PowerSGD's U, P and Q) or an all-gather
// whose output is `bytes`, N messages of bytes/N (top-k, QSGD, sign). PowerSGD's steps after
// start_powerSGD_iter.
struct BucketCollective {
  bool all_gather = false;
  double bytes = 0;
};
std::vector<BucketCollective> compressed_bucket_collectives(const std::vector<int64_t>& numels,
                                                            const std::vector<std::vector<int64_t>>& shapes,
                                                            const std::string& compression, int ranks);

}  // namespace cost
}  // namespace tessera
