#include "tensor/cuda/pinned_allocator.h"

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "tensor/cuda/caching_allocator.h"
#include "tensor/cuda/cuda_check.h"

namespace tessera {
namespace cuda {

namespace {

struct HostBlock {
  size_t size = 0;
  bool in_use = false;
  std::vector<std::unique_ptr<Event>> uses;  // copies that may still touch the block

  bool uses_finished() {
    for (auto& e : uses) {
      if (!e->query()) return false;
    }
    uses.clear();
    return true;
  }
};

class PinnedAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes, Device device) override {
    if (nbytes == 0) return nullptr;
    const size_t size = round_size(nbytes);
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [ptr, block] : blocks_) {
      if (!block.in_use && block.size >= size && block.size <= size + size / 8 &&
          block.uses_finished()) {
        block.in_use = true;
        record_allocation(device, static_cast<int64_t>(nbytes));
        return ptr;
      }
    }
    TS_CHECK(device_count() > 0, "pin_memory: ", unavailable_reason());
    void* ptr = nullptr;
    TS_CUDA_CHECK(cudaHostAlloc(&ptr, size, cudaHostAllocPortable));
    HostBlock& block = blocks_[ptr];
    block.size = size;
    block.in_use = true;
    record_allocation(device, static_cast<int64_t>(nbytes));
    return ptr;
  }

  void deallocate(void* ptr, size_t nbytes, Device device) override {
    if (ptr == nullptr) return;
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = blocks_.find(ptr);
    TS_INTERNAL_ASSERT(it != blocks_.end(), "PinnedAllocator: freeing unknown pointer");
    it->second.in_use = false;
    record_deallocation(device, static_cast<int64_t>(nbytes));
  }

  bool record_use(const void* ptr, const Stream& stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = blocks_.upper_bound(const_cast<void*>(ptr));
    if (it == blocks_.begin()) return false;
    --it;
    const char* base = static_cast<const char*>(it->first);
    if (static_cast<const char*>(ptr) >= base + it->second.size) return false;
    auto event = std::make_unique<Event>();
    event->record(stream);
    it->second.uses.push_back(std::move(event));
    return true;
  }

 private:
  std::mutex mutex_;
  std::map<void*, HostBlock> blocks_;
};

PinnedAllocator& instance() {
  static PinnedAllocator* allocator = new PinnedAllocator();
  return *allocator;
}

}  // namespace

Allocator* pinned_allocator() { return &instance(); }

bool record_pinned_use(const void* ptr, const Stream& stream) {
  return instance().record_use(ptr, stream);
}

}  // namespace cuda
}  // namespace tessera
