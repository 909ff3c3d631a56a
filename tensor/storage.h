// Storage: the bytes behind one or more Tensors (views share a Storage).
//
// A storage can be released (its bytes go back to the allocator and leave the memory
// statistics) and later re-materialized in place: every tensor that shares it sees the new
// bytes at the same address-independent offsets. ZeRO-3 uses this to free gathered parameters
// after a unit's forward and gather them again before its backward.
#pragma once

#include <cstddef>
#include <memory>

#include "tensor/device.h"

namespace tessera {

class Allocator;

class Storage {
 public:
  Storage(size_t nbytes, Device device);
  // Bytes from a specific allocator (pinned host memory for fast copies to and from a GPU).
  Storage(size_t nbytes, Device device, Allocator* allocator);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  Allocator* allocator() const { return allocator_; }
  bool is_materialized() const { return data_ != nullptr || nbytes_ == 0; }

  // Frees the bytes; the size is kept so materialize() can bring them back.
  void release();
  // Allocates the bytes again (contents undefined) if they were released.
  void materialize();

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  Allocator* allocator_ = nullptr;
};

}  // namespace tessera
