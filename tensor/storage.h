// Storage: the bytes behind one or more Tensors (views share a Storage).
//
// A storage can be released (its bytes go back to the allocator and leave the memory
// statistics) and later re-materialized in place: every tensor that shares it sees the new
// bytes at the same address-independent offsets. ZeRO-3 uses this to free gathered parameters
// after a unit's forward and gather them again before its backward.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "tensor/device.h"

namespace tessera {

class Allocator;

// What fills a deferred storage when it is materialized (tensor/deferred_init.h): the last
// whole-tensor initializer a model's constructor ran on it, with the generator counters it
// claimed, so the values are those an eager construction would have drawn.
struct DeferredFill {
  enum class Kind { kNone, kConstant, kUniform, kNormal };
  Kind kind = Kind::kNone;  // kNone: never initialized (materializes as zeros)
  double a = 0;             // constant: the value; uniform: low; normal: mean
  double b = 0;             // uniform: high; normal: std
  uint64_t seed = 0;
  uint64_t offset = 0;
};

class Storage {
 public:
  Storage(size_t nbytes, Device device);
  // Bytes from a specific allocator (pinned host memory for fast copies to and from a GPU).
  Storage(size_t nbytes, Device device, Allocator* allocator);
  // A deferred storage (tensor/deferred_init.h): the size and an initializer, no bytes until
  // deferred_init's materialize() allocates and fills them.
  struct Deferred {};
  Storage(size_t nbytes, Device device, Deferred);
  // A storage whose bytes are elsewhere (a ZeRO-3 parameter between its unit's uses): no bytes,
  // and what any read of it says (`why`), since nothing may compute with it.
  struct Absent {
    std::string why;
  };
  Storage(size_t nbytes, Device device, Absent absent);
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

  // Deferred: no bytes yet, and what will fill them (set while a constructor initializes it).
  bool deferred() const { return deferred_; }
  DeferredFill& deferred_fill() { return fill_; }
  void end_deferral() { deferred_ = false; }
  // Absent: why the bytes are not here ("" for any other storage).
  const std::string& absent_why() const { return absent_why_; }

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  Allocator* allocator_ = nullptr;
  bool deferred_ = false;
  DeferredFill fill_;
  std::string absent_why_;
};

}  // namespace tessera
