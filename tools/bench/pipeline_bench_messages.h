// pipeline_bench --messages: what one stage-to-stage message costs, beside Open MPI's own
// ping-pong on the same two ranks.
//
//   mpirun -np 2 bazel-bin/tools/bench/pipeline_bench --messages [--sizes=4096,65536,524288,4194304
//       --batches=15]
//
// Two ranks bounce a message back and forth; a message's one-way time is half a round trip.
// For each size, four ping-pongs run in turn, batch after batch (so machine noise falls on all
// of them alike), and each prints the median batch and the spread over the batches:
//
//   MPI          MPI_Send / MPI_Recv of the payload alone, hot buffers (as osu_latency)
//   MPI 1 msg    the same with a 128-byte header gathered into the message by a derived datatype
//                (one message, no copy by the caller): what "the header in the payload's
//                message" costs in MPI itself
//   MPI 2 msgs   the header and the payload as two messages, both receives posted beforehand
//   send/recv    pipeline::send_tensor / recv_tensor as the executor calls them: activations one
//                way, gradients back, each checked against the micro-batch the receiver expects
//
// A payload of n bytes is an f32 tensor of shape [n / 1024, 256].
#pragma once

#include <memory>
#include <string>

#include "dist/process_group.h"

namespace tessera {
namespace bench {

struct MessageBenchOptions {
  std::vector<int64_t> sizes = {4096, 65536, 524288, 4194304};  // bytes per message
  int batches = 15;
};

// Prints the table on rank 0. Needs a world of exactly 2 ranks.
void run_message_bench(const std::shared_ptr<dist::ProcessGroup>& world,
                       const MessageBenchOptions& options);

}  // namespace bench
}  // namespace tessera
