#include "dist/zero/offload/shard_home.h"

#include <utility>

#include "autograd/grad_mode.h"
#include "optim/clip_grad.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {
namespace offload {

namespace {
void wait_all(std::vector<IoRequest>& requests) {
  for (const IoRequest& r : requests) r.wait();
  requests.clear();
}
}  // namespace

void WriteBehind::add(SwappedVector::Transfer write) {
  writes_.push_back(std::move(write));
  while (writes_.size() > depth_) {
    writes_.front().wait();
    writes_.erase(writes_.begin());
  }
}

void WriteBehind::drain() {
  for (SwappedVector::Transfer& w : writes_) w.wait();
  writes_.clear();
}

ShardHome::ShardHome(int64_t numel, DType dtype, Device device, int64_t piece_numel,
                     std::shared_ptr<OffloadStore> values, std::shared_ptr<OffloadStore> gradients,
                     std::shared_ptr<WriteBehind> writes)
    : numel_(numel), dtype_(dtype), device_(device),
      writes_(writes != nullptr ? std::move(writes) : std::make_shared<WriteBehind>()) {
  TS_CHECK(numel_ > 0, "ShardHome: a shard needs elements, got ", numel_);
  if (values != nullptr) {
    values_ = std::make_unique<SwappedVector>(numel, dtype, device, piece_numel, std::move(values));
  }
  if (gradients != nullptr) {
    gradients_ = std::make_unique<SwappedVector>(numel, dtype, device, piece_numel,
                                                 std::move(gradients));
  }
}

ShardHome::~ShardHome() { finish_transfers(); }

void ShardHome::finish_transfers() {
  values_read_.wait();
  gradient_read_.wait();
  wait_all(values_writing_);
  wait_all(gradient_writing_);
  writes_->drain();
}

void ShardHome::prefetch(bool gradient) {
  if (values_ != nullptr && !values_read_.pending()) {
    wait_all(values_writing_);
    values_read_ = values_->post_read();
  }
  if (gradient && gradients_ != nullptr && has_gradient_ && !gradient_read_.pending()) {
    wait_all(gradient_writing_);
    gradient_read_ = gradients_->post_read();
  }
}

Tensor ShardHome::read_values() {
  TS_CHECK(values_ != nullptr, "ShardHome: the values are not offloaded");
  if (!values_read_.pending()) prefetch(false);
  return values_read_.take();
}

void ShardHome::write_values(const Tensor& values) {
  TS_CHECK(values_ != nullptr, "ShardHome: the values are not offloaded");
  values_read_.wait();  // a prefetch of the values being replaced: dropped
  values_read_ = SwappedVector::Transfer();
  wait_all(values_writing_);
  SwappedVector::Transfer write = values_->post_write(values);
  values_writing_ = write.requests();
  writes_->add(std::move(write));
}

Tensor ShardHome::read_gradient() {
  TS_CHECK(gradients_ != nullptr, "ShardHome: the gradient is not offloaded");
  if (!has_gradient_) return Tensor();
  if (!gradient_read_.pending()) {
    wait_all(gradient_writing_);
    gradient_read_ = gradients_->post_read();
  }
  return gradient_read_.take();
}

void ShardHome::write_gradient(const Tensor& gradient) {
  TS_CHECK(gradients_ != nullptr, "ShardHome: the gradient is not offloaded");
  TS_CHECK(gradient.dtype() == dtype_, "ShardHome: a ", gradient.dtype(), " gradient for a ",
           dtype_, " shard");
  gradient_read_.wait();
  gradient_read_ = SwappedVector::Transfer();
  wait_all(gradient_writing_);
  SwappedVector::Transfer write = gradients_->post_write(gradient);
  gradient_writing_ = write.requests();
  writes_->add(std::move(write));
  squared_sum_ = optim::squared_sum(gradient);
  has_gradient_ = true;
}

void ShardHome::clear_gradient() {
  gradient_read_.wait();  // a prefetch of the gradient being forgotten
  gradient_read_ = SwappedVector::Transfer();
  has_gradient_ = false;
}

void ShardHome::bring_in(const Variable& shard) {
  if (values_ != nullptr) shard.set_data(read_values());
  if (gradients_ != nullptr) shard.set_grad(read_gradient());
}

void ShardHome::put_back(const Variable& shard, bool values_changed) {
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
