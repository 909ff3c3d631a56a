#include "pipeline/p2p.h"

#include "tensor/check.h"

namespace tessera {
namespace pipeline {
namespace {

constexpr int kMaxDims = 8;
constexpr int64_t kHeaderLength = 4 + kMaxDims;
// Tags: activations and gradients travel on their own tags, header then payload.
constexpr int kActivationTag = 7100;
constexpr int kGradientTag = 7200;

int header_tag(MessageKind kind) { return kind == MessageKind::kActivation ? kActivationTag : kGradientTag; }
const char* kind_name(MessageKind kind) { return kind == MessageKind::kActivation ? "activation" : "gradient"; }

}  // namespace

std::vector<std::shared_ptr<dist::Work>> send_tensor(dist::ProcessGroup& group, const Tensor& tensor,
                                                     int dst, MessageKind kind, int microbatch,
                                                     int virtual_stage) {
  TS_CHECK(tensor.dim() <= kMaxDims, "pipeline send: a ", kind_name(kind), " of shape ",
           tensor.shape(), " has more than ", kMaxDims, " dimensions");
  Tensor header = zeros({kHeaderLength}, kI64);
  int64_t* h = header.data<int64_t>();
  h[0] = microbatch;
  h[1] = virtual_stage;
  h[2] = static_cast<int64_t>(tensor.dtype());
  h[3] = tensor.dim();
  for (int64_t d = 0; d < tensor.dim(); ++d) h[4 + d] = tensor.size(d);
  const Tensor payload = tensor.contiguous().view({tensor.numel()});
  return {group.send(header, dst, header_tag(kind)), group.send(payload, dst, header_tag(kind) + 1)};
}

Tensor recv_tensor(dist::ProcessGroup& group, int src, MessageKind kind, int microbatch,
                   int virtual_stage, Device device) {
  Tensor header = zeros({kHeaderLength}, kI64);
  group.recv(header, src, header_tag(kind))->wait();
  const int64_t* h = header.data<int64_t>();
  TS_CHECK(h[0] == microbatch && h[1] == virtual_stage, "pipeline recv: expected the ",
           kind_name(kind), " of micro-batch ", microbatch, " from virtual stage ", virtual_stage,
           " (rank ", src, "), got micro-batch ", h[0], " from virtual stage ", h[1],
           ": the two ranks run different schedules");
  TS_CHECK(h[3] >= 0 && h[3] <= kMaxDims, "pipeline recv: bad header from rank ", src, " (",
           h[3], " dimensions)");
  Shape shape(h + 4, h + 4 + h[3]);
  Tensor out = empty(shape, TensorOptions(static_cast<DType>(h[2])).device(device));
  group.recv(out.view({out.numel()}), src, header_tag(kind) + 1)->wait();
  return out;
}

}  // namespace pipeline
}  // namespace tessera
