#include "dist/zero/offload/shard_home.h"

#include <utility>

#include "autograd/grad_mode.h"
#include "optim/clip_grad.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {
namespace offload {

ShardHome::ShardHome(int64_t numel, DType dtype, Device device, int64_t piece_numel,
                     std::shared_ptr<OffloadStore> values, std::shared_ptr<OffloadStore> gradients)
    : numel_(numel), dtype_(dtype), device_(device) {
  TS_CHECK(numel_ > 0, "ShardHome: a shard needs elements, got ", numel_);
  if (values != nullptr) {
    values_ = std::make_unique<SwappedVector>(numel, dtype, device, piece_numel, std::move(values));
  }
  if (gradients != nullptr) {
    gradients_ = std::make_unique<SwappedVector>(numel, dtype, device, piece_numel,
                                                 std::move(gradients));
  }
}

Tensor ShardHome::read_values() const {
  TS_CHECK(values_ != nullptr, "ShardHome: the values are not offloaded");
  return values_->read();
}

void ShardHome::write_values(const Tensor& values) const {
  TS_CHECK(values_ != nullptr, "ShardHome: the values are not offloaded");
  values_->write(values);
}

Tensor ShardHome::read_gradient() const {
  TS_CHECK(gradients_ != nullptr, "ShardHome: the gradient is not offloaded");
  return has_gradient_ ? gradients_->read() : Tensor();
}

void ShardHome::write_gradient(const Tensor& gradient) {
  TS_CHECK(gradients_ != nullptr, "ShardHome: the gradient is not offloaded");
  TS_CHECK(gradient.dtype() == dtype_, "ShardHome: a ", gradient.dtype(), " gradient for a ",
           dtype_, " shard");
  gradients_->write(gradient);
  squared_sum_ = optim::squared_sum(gradient);
  has_gradient_ = true;
}

void ShardHome::bring_in(const Variable& shard) const {
  if (values_ != nullptr) shard.set_data(read_values());
  if (gradients_ != nullptr) shard.set_grad(read_gradient());
}

void ShardHome::put_back(const Variable& shard, bool values_changed) const {
  if (values_ != nullptr) {
    if (values_changed) write_values(shard.data());
    shard.set_data(empty({0}, TensorOptions(dtype_).device(device_)));
  }
  if (gradients_ != nullptr) shard.set_grad(Tensor());
}

void ShardHome::take_from(const Variable& shard) {
  NoGradGuard no_grad;
  if (values_ != nullptr) {
    write_values(shard.data());
    shard.set_data(empty({0}, TensorOptions(dtype_).device(device_)));
  }
  if (gradients_ != nullptr) {
    if (shard.grad().defined()) {
      write_gradient(shard.grad());
    } else {
      has_gradient_ = false;
    }
    shard.set_grad(Tensor());
  }
}

}  // namespace offload
}  // namespace dist
}  // namespace tessera
