#include "tensor/storage.h"

#include "tensor/allocator.h"

namespace tessera {

Storage::Storage(size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  data_ = get_allocator(device.type())->allocate(nbytes, device);
}

Storage::~Storage() { release(); }

void Storage::release() {
  if (data_ == nullptr) return;
  get_allocator(device_.type())->deallocate(data_, nbytes_, device_);
  data_ = nullptr;
}

void Storage::materialize() {
  if (data_ != nullptr || nbytes_ == 0) return;
  data_ = get_allocator(device_.type())->allocate(nbytes_, device_);
}

}  // namespace tessera
