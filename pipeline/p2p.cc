#include "pipeline/p2p.h"

#include <algorithm>

#include "pipeline/tensor_header.h"
#include "tensor/check.h"
#include "tensor/shape.h"

namespace tessera {
namespace pipeline {
namespace {

constexpr int64_t kHeaderLength = 16;  // i64 values
constexpr int64_t kHeaderBytes = kHeaderLength * 8;
// Header fields: the tensor's dtype and shape are a tensor header (tensor_header.h) at kTensor.
constexpr int kMicrobatch = 0, kVirtualStage = 1, kTensor = 2,
              kPayloadBytes = kTensor + kTensorHeaderLength, kRoute = kPayloadBytes + 1;
// Where the payload went: into the posted room (T+1), or on its own tag (T+2) after an empty T+1.
constexpr int64_t kInPostedRoom = 0, kOnItsOwnTag = 1;
// Tags: activations and gradients travel on their own: header T, payload T+1, oversized T+2.
constexpr int kActivationTag = 7100;
constexpr int kGradientTag = 7200;

int header_tag(MessageKind kind) { return kind == MessageKind::kActivation ? kActivationTag : kGradientTag; }
const char* kind_name(MessageKind kind) { return kind == MessageKind::kActivation ? "activation" : "gradient"; }

// The bytes [at, at + length) of a flat byte buffer as a contiguous tensor of `dtype`.
Tensor view_bytes(const Tensor& buffer, int64_t at, const Shape& shape, DType dtype) {
  const int64_t element = static_cast<int64_t>(element_size(dtype));
  TS_INTERNAL_ASSERT(at % element == 0 && at + numel(shape) * element <= buffer.numel());
  return Tensor(buffer.storage(), shape, contiguous_strides(shape), buffer.offset() + at / element,
                dtype);
}

std::string describe(const Shape& shape, DType dtype) {
  return detail::str(dtype_name(dtype), " ", shape);
}

}  // namespace

Mailbox::Mailbox(std::shared_ptr<dist::ProcessGroup> group) : group_(std::move(group)) {
  TS_CHECK(group_ != nullptr, "Mailbox: no process group");
}

Mailbox::~Mailbox() {
  for (auto& [channel, inbox] : inboxes_) {
    for (Posted& p : inbox.posted) {
      // Deliberately leaked: a Work's destructor would wait for a message that may never come.
      new Posted(std::move(p));
    }
  }
}

void Mailbox::expect(int src, MessageKind kind, int count) {
  Inbox& inbox = inboxes_[{src, kind}];
  // Receives still posted (left by a list that ended early) are the channel's next messages.
  inbox.to_post = std::max(0, count - static_cast<int>(inbox.posted.size()));
  top_up(src, kind, inbox);
}

void Mailbox::top_up(int src, MessageKind kind, Inbox& inbox) {
  while (inbox.to_post > 0 && static_cast<int>(inbox.posted.size()) < kPrePosted) {
    post(src, kind, inbox);
    --inbox.to_post;
  }
}

void Mailbox::post(int src, MessageKind kind, Inbox& inbox) {
  // Room for the largest payload taken so far: at least the largest of messages 0 .. j-kPrePosted
  // for this message j, since at most kPrePosted receives are posted and not yet taken.
  Posted p;
  p.room = inbox.largest;
  p.buffer = inbox.buffers.take(kHeaderBytes + p.room);
  const int tag = header_tag(kind);
  p.header = group_->recv(p.buffer.narrow(0, 0, kHeaderBytes), src, tag);
  p.payload = group_->recv(p.buffer.narrow(0, kHeaderBytes, p.room), src, tag + 1);
  inbox.posted.push_back(std::move(p));
}

std::vector<std::shared_ptr<dist::Work>> Mailbox::send_tensor(const Tensor& tensor, int dst,
                                                              MessageKind kind, int microbatch,
                                                              int virtual_stage) {
  TS_CHECK(tensor.dim() <= kTensorHeaderMaxDims, "pipeline send: a ", kind_name(kind), " of shape ",
           tensor.shape(), " has more than ", kTensorHeaderMaxDims, " dimensions");
  const Tensor payload = tensor.contiguous().view({tensor.numel()});
  const int64_t bytes = static_cast<int64_t>(payload.nbytes());
  Outbox& out = outboxes_[{dst, kind}];
  const bool fits = bytes <= out.settled;  // the receiver's posted room holds at least `settled`
  out.recent.push_back(bytes);
  if (static_cast<int>(out.recent.size()) >= Mailbox::kPrePosted) {
    out.settled = std::max(out.settled, out.recent.front());
    out.recent.pop_front();
  }

  Tensor header = zeros({kHeaderLength}, kI64);
  int64_t* h = header.data<int64_t>();
  h[kMicrobatch] = microbatch;
  h[kVirtualStage] = virtual_stage;
  write_tensor_header(tensor, h + kTensor);
  h[kPayloadBytes] = bytes;
  h[kRoute] = fits ? kInPostedRoom : kOnItsOwnTag;
  const int tag = header_tag(kind);
  if (fits) return {group_->send(header, dst, tag), group_->send(payload, dst, tag + 1)};
  return {group_->send(header, dst, tag), group_->send(empty({0}, kU8), dst, tag + 1),
          group_->send(payload, dst, tag + 2)};
}

Tensor Mailbox::recv_tensor(int src, MessageKind kind, int microbatch, int virtual_stage,
                            Device device, const ExpectedTensor* expected) {
  Inbox& inbox = inboxes_[{src, kind}];
  if (inbox.posted.empty()) post(src, kind, inbox);  // not announced by expect()
  Posted p = std::move(inbox.posted.front());
  inbox.posted.pop_front();

  p.header->wait();
  const int64_t* h = view_bytes(p.buffer, 0, {kHeaderLength}, kI64).data<int64_t>();
  TS_CHECK(h[kMicrobatch] == microbatch && h[kVirtualStage] == virtual_stage,
           "pipeline recv: expected the ", kind_name(kind), " of micro-batch ", microbatch,
           " from virtual stage ", virtual_stage, " (rank ", src, "), got micro-batch ",
           h[kMicrobatch], " from virtual stage ", h[kVirtualStage],
           ": the two ranks run different schedules");
  TS_CHECK(is_tensor_header(h + kTensor) && (h[kRoute] == kInPostedRoom || h[kRoute] == kOnItsOwnTag),
           "pipeline recv: bad header from rank ", src, " (", h[kTensor + kTensorHeaderNdim],
           " dimensions, dtype ", h[kTensor + kTensorHeaderDType], ", route ", h[kRoute], ")");
  const Shape shape = tensor_header_shape(h + kTensor);
  const DType dtype = tensor_header_dtype(h + kTensor);
  const int64_t bytes = h[kPayloadBytes];
  TS_CHECK(bytes == numel(shape) * static_cast<int64_t>(element_size(dtype)),
           "pipeline recv: bad header from rank ", src, ": ", bytes, " payload bytes for ",
           describe(shape, dtype));
  TS_CHECK(expected == nullptr || (expected->shape == shape && expected->dtype == dtype),
           "pipeline recv: expected the ", kind_name(kind), " of micro-batch ", microbatch,
           " from virtual stage ", virtual_stage, " (rank ", src, ") as ",
           describe(expected->shape, expected->dtype), ", got ", describe(shape, dtype));
  // The next receive goes up now, while this payload may still be on its way; with this
  // message's size known, as the sender's rule assumes.
  inbox.largest = std::max(inbox.largest, bytes);
  top_up(src, kind, inbox);

  p.payload->wait();
  Tensor buffer = p.buffer;
  int64_t at = kHeaderBytes;
  if (h[kRoute] == kOnItsOwnTag) {
    // Larger than the posted room (which took an empty message): the payload, at its size.
    buffer = inbox.buffers.take(bytes);
    at = 0;
    group_->recv(buffer.narrow(0, 0, bytes), src, header_tag(kind) + 2)->wait();
  }
  p = Posted();  // the view below is now the only user of the buffer
  const Tensor out = view_bytes(buffer, at, shape, dtype);
  return device.is_cpu() ? out : out.to(device);
}

int64_t Mailbox::buffer_bytes() const {
  int64_t total = 0;
  for (const auto& [channel, inbox] : inboxes_) total += inbox.buffers.bytes();
  return total;
}

}  // namespace pipeline
}  // namespace tessera
