#include "tensor/storage.h"

#include <utility>

#include "tensor/allocator.h"

namespace tessera {

Storage::Storage(size_t nbytes, Device device)
    : Storage(nbytes, device, get_allocator(device.type())) {}

Storage::Storage(size_t nbytes, Device device, Allocator* allocator)
    : nbytes_(nbytes), device_(device), allocator_(allocator) {
  data_ = allocator_->allocate(nbytes, device);
}

Storage::Storage(size_t nbytes, Device device, Deferred)
    : nbytes_(nbytes), device_(device), allocator_(get_allocator(device.type())),
      deferred_(nbytes > 0) {}

Storage::Storage(size_t nbytes, Device device, Absent absent)
    : nbytes_(nbytes), device_(device), allocator_(get_allocator(device.type())),
      absent_why_(std::move(absent.why)) {}

Storage::~Storage() { release(); }

void Storage::release() {
  if (data_ == nullptr) return;
  allocator_->deallocate(data_, nbytes_, device_);
  data_ = nullptr;
}

void Storage::materialize() {
  if (data_ != nullptr || nbytes_ == 0) return;
  data_ = allocator_->allocate(nbytes_, device_);
}

}  // namespace tessera
