// --compression's figures in the final JSON: the bytes DDP's buckets sent per step, measured on
// the data-parallel group's ledger, beside what the uncompressed ring all-reduce sends
// (2 (N-1)/N x 4 bytes per f32 element) and what the compressor's own formula predicts:
//
//   "compression": {"name": "topk:0.1", "bytes_per_step": ..., "bytes_per_step_uncompressed": ...,
//                   "ratio": measured / uncompressed, "ratio_theory": formula / uncompressed}
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dist/ddp/comm_hooks.h"

namespace tessera {
namespace train {

// `buckets`: DDP's, as the hook saw them; `ranks`: the data-parallel group's size; `steps` and
// `bucket_bytes`: the training steps run and the bytes their backwards sent.
std::string compression_json(const dist::CommunicationHook& hook,
                             const std::vector<dist::GradBucket>& buckets, int ranks,
                             int64_t steps, int64_t bucket_bytes);

}  // namespace train
}  // namespace tessera
