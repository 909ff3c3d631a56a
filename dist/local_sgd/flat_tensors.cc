#include "dist/local_sgd/flat_tensors.h"

#include <memory>

#include "tensor/ops.h"

namespace tessera {
namespace dist {

FlatTensors::FlatTensors(const std::vector<Tensor>& like, const char* who) : who_(who) {
  std::vector<DType> buffer_dtypes;
  std::vector<Device> buffer_devices;
  std::vector<int64_t> buffer_numel;
  for (size_t i = 0; i < like.size(); ++i) {
    const Tensor& t = like[i];
    TS_CHECK(t.defined(), who_, ": tensor ", i, " is undefined");
    TS_CHECK(is_floating(t.dtype()), who_, ": tensor ", i, " is ", t.dtype(),
             "; only floating-point tensors can be averaged");
    size_t b = 0;
    while (b < buffer_dtypes.size() && buffer_dtypes[b] != t.dtype()) ++b;
    if (b == buffer_dtypes.size()) {
      buffer_dtypes.push_back(t.dtype());
      buffer_devices.push_back(t.device());
      buffer_numel.push_back(0);
    }
    TS_CHECK(t.device() == buffer_devices[b], who_, ": tensor ", i, " is on ", t.device(),
             ", the first ", t.dtype(), " tensor on ", buffer_devices[b],
             " (one device per dtype)");
    buffer_of_.push_back(b);
    offset_of_.push_back(buffer_numel[b]);
    buffer_numel[b] += t.numel();
    shapes_.push_back(t.shape());
    dtypes_.push_back(t.dtype());
  }
  for (size_t b = 0; b < buffer_dtypes.size(); ++b) {
    buffers_.push_back(
        empty({buffer_numel[b]}, TensorOptions(buffer_dtypes[b]).device(buffer_devices[b])));
  }
}

int64_t FlatTensors::numel() const {
  int64_t n = 0;
  for (const Tensor& b : buffers_) n += b.numel();
  return n;
}

Tensor FlatTensors::view(size_t i) const {
  TS_CHECK(i < shapes_.size(), who_, ": tensor index ", i, " out of range [0, ", shapes_.size(),
           ")");
  int64_t numel = 1;
  for (int64_t d : shapes_[i]) numel *= d;
  return buffers_[buffer_of_[i]].narrow(0, offset_of_[i], numel).view(shapes_[i]);
}

void FlatTensors::check_matches(const std::vector<Tensor>& tensors, const char* what) const {
  TS_CHECK(tensors.size() == shapes_.size(), who_, ": ", what, " got ", tensors.size(),
           " tensors, the layout has ", shapes_.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    TS_CHECK(tensors[i].shape() == shapes_[i] && tensors[i].dtype() == dtypes_[i], who_, ": ",
             what, ": tensor ", i, " is ", tensors[i].dtype(), tensors[i].shape(),
             ", the layout has ", dtypes_[i], shapes_[i]);
  }
}

void FlatTensors::pack(const std::vector<Tensor>& tensors) {
  check_matches(tensors, "pack");
  for (size_t i = 0; i < tensors.size(); ++i) view(i).copy_(tensors[i]);
}

void FlatTensors::unpack(const std::vector<Tensor>& tensors) const {
  check_matches(tensors, "unpack");
  for (size_t i = 0; i < tensors.size(); ++i) Tensor(tensors[i]).copy_(view(i));
}

void FlatTensors::all_reduce_mean(ProcessGroup& group) {
  std::vector<std::shared_ptr<Work>> works;
  for (const Tensor& b : buffers_) works.push_back(group.all_reduce(b, ReduceOp::kMean));
  for (auto& w : works) w->wait();
}

}  // namespace dist
}  // namespace tessera
