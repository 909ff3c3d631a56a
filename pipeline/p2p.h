// Point-to-point messages between stages: a tensor led by a small header, received into
// buffers posted before the message comes and reused across steps.
//
//   one receive buffer (message_buffers.h), per channel = (peer, activation or gradient):
//   [ header: 16 x i64 = 128 B | payload room: the tensor's elements, contiguous ........ ]
//     microbatch, virtual stage of the sender, dtype, ndim, dims[8], payload bytes, route
//
// The header lets the receiver check that the message is the one its schedule expects (a
// mismatch is an error naming both, never a silent mix-up) and find the shape without knowing
// it in advance (the last batch of an epoch has smaller micro-batches). The received tensor is
// a view of the payload room: no copy beyond the transport's own (a CUDA stage copies it once,
// to the device).
//
// Header and payload travel as two messages of one send (tags T and T+1), received into the two
// parts of one buffer. A single message would need the sender to gather the header in front of
// the payload, and Open MPI moves such a message by copying it through shared memory instead of
// reading the sender's buffer directly: measured 1.5x the payload alone at 512 KiB, against 1.0x
// for the two messages (pipeline_bench --messages, docs/PIPELINE.md).
//
// Pre-posting. The executor tells the Mailbox how many receives its action list has per channel
// (expect()); the Mailbox keeps the next kPrePosted of them posted, so a message lands where it
// belongs as soon as it arrives, and recv_tensor() only waits for it. A posted buffer must be
// large enough for the message before its size is known. Both ends know the sizes of the
// channel's earlier messages, and a receive is posted only after the message kPrePosted before
// it was taken, so:
//
//   message j goes into the posted room   if its payload <= the largest of messages 0 .. j-kPrePosted
//   otherwise (the first messages of a run, a larger batch): the sender fills the posted room
//   with an empty message on T+1 and sends the payload on tag T+2, received with its exact
//   size once the header has said so (header's route field). Nothing is ever truncated.
//
// Messages with the same tag between two ranks arrive in the order they were sent (MPI's
// non-overtaking rule), so both ends count a channel's messages alike. Everything goes through
// the process group's send/recv: the byte ledger counts it, network emulation holds it.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "dist/process_group.h"
#include "pipeline/message_buffers.h"
#include "tensor/tensor.h"

namespace tessera {
namespace pipeline {

enum class MessageKind { kActivation, kGradient };

// What a receiver knows about a message before it arrives, when it knows it (a gradient has its
// output's shape and dtype): recv_tensor checks the header against it.
struct ExpectedTensor {
  Shape shape;
  DType dtype;
};

class Mailbox {
 public:
  // Receives kept posted ahead per channel.
  static constexpr int kPrePosted = 1;

  explicit Mailbox(std::shared_ptr<dist::ProcessGroup> group);
  // Receives still posted (a list that ended in an error) are left to the transport, their
  // buffers with them: freeing memory MPI may still write into is worse than the leak.
  ~Mailbox();
  Mailbox(const Mailbox&) = delete;
  Mailbox& operator=(const Mailbox&) = delete;

  // The next `count` messages of `kind` from `src` are expected (the receives of the action list
  // about to run): posts the first of them. Receives not announced are posted when asked for.
  void expect(int src, MessageKind kind, int count);

  // Returns the sends' Works; the caller waits for them before the tensor may change.
  std::vector<std::shared_ptr<dist::Work>> send_tensor(const Tensor& tensor, int dst,
                                                       MessageKind kind, int microbatch,
                                                       int virtual_stage);

  // Blocks until the next message of `kind` from `src` has arrived and checks that it carries
  // `microbatch` from `virtual_stage` (and matches `expected`, if given). The tensor is a view
  // of a receive buffer (on the CPU), or a copy of it on `device`.
  Tensor recv_tensor(int src, MessageKind kind, int microbatch, int virtual_stage,
                     Device device = Device::cpu(), const ExpectedTensor* expected = nullptr);

  // Bytes held by the receive buffers of every channel.
  int64_t buffer_bytes() const;

 private:
  struct Posted {
    Tensor buffer;  // [header | room]
    std::shared_ptr<dist::Work> header, payload;
    int64_t room = 0;
  };
  struct Inbox {  // one channel's receiving end
    MessageBuffers buffers;
    std::deque<Posted> posted;  // the channel's next messages, in order
    int to_post = 0;            // expected receives not yet posted
    int64_t largest = 0;        // the largest payload taken so far
  };
  struct Outbox {  // one channel's sending end
    int64_t settled = 0;          // the largest payload of messages 0 .. next-kPrePosted
    std::deque<int64_t> recent;   // the payloads sent since (kPrePosted - 1 of them)
  };
  using Channel = std::pair<int, MessageKind>;  // (peer, kind)

  void post(int src, MessageKind kind, Inbox& inbox);
  void top_up(int src, MessageKind kind, Inbox& inbox);

  std::shared_ptr<dist::ProcessGroup> group_;
  std::map<Channel, Inbox> inboxes_;
  std::map<Channel, Outbox> outboxes_;
};

}  // namespace pipeline
}  // namespace tessera
