#include "tensor/cuda/caching_allocator.h"

#include <map>
#include <mutex>
#include <unordered_map>

#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/runtime.h"

namespace tessera {
namespace cuda {

namespace {

constexpr size_t kSmallLimit = 1 << 20;   // 1 MiB
constexpr size_t kSmallRound = 512;
constexpr size_t kLargeRound = 2 << 20;   // 2 MiB

struct Block {
  void* ptr = nullptr;
  size_t size = 0;  // the size class (what cudaMalloc gave)
  int device = 0;
  cudaStream_t stream = nullptr;
};

class CachingAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes, Device device) override {
    if (nbytes == 0) return nullptr;
    check_device(device);
    const int d = device.index();
    const cudaStream_t stream = current_stream(d).handle();
    const size_t size = round_size(nbytes);
    std::lock_guard<std::mutex> lock(mutex_);
    Block block;
    if (!take_cached(d, stream, size, &block)) block = malloc_block(d, stream, size, nbytes);
    in_use_[block.ptr] = block;
    record_allocation(device, static_cast<int64_t>(nbytes));
    return block.ptr;
  }

  void deallocate(void* ptr, size_t nbytes, Device device) override {
    if (ptr == nullptr) return;
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = in_use_.find(ptr);
    TS_INTERNAL_ASSERT(it != in_use_.end(), "CachingAllocator: freeing unknown pointer");
    const Block block = it->second;
    in_use_.erase(it);
    free_lists_[{block.device, block.stream}].emplace(block.size, block);
    cached_[block.device] += static_cast<int64_t>(block.size);
    record_deallocation(device, static_cast<int64_t>(nbytes));
  }

  int64_t reserved(int device) {
    std::lock_guard<std::mutex> lock(mutex_);
    return reserved_[device];
  }
  int64_t cached(int device) {
    std::lock_guard<std::mutex> lock(mutex_);
    return cached_[device];
  }

  void empty() {
    std::lock_guard<std::mutex> lock(mutex_);
    release_cached(-1);
  }

 private:
  using PoolKey = std::pair<int, cudaStream_t>;

  bool take_cached(int device, cudaStream_t stream, size_t size, Block* out) {
    auto pool = free_lists_.find({device, stream});
    if (pool == free_lists_.end()) return false;
    auto it = pool->second.lower_bound(size);
    if (it == pool->second.end() || it->first > size + size / 8) return false;
    *out = it->second;
    pool->second.erase(it);
    cached_[device] -= static_cast<int64_t>(out->size);
    return true;
  }

  Block malloc_block(int device, cudaStream_t stream, size_t size, size_t requested) {
    DeviceGuard guard(device);
    Block block{nullptr, size, device, stream};
    cudaError_t status = cudaMalloc(&block.ptr, size);
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      release_cached(device);
      status = cudaMalloc(&block.ptr, size);
    }
    if (status != cudaSuccess) {
      cudaGetLastError();
      TS_FAIL("CUDA out of memory on cuda:", device, ": asked for ", requested, " bytes (",
              size, " with rounding); tensors hold ",
              memory_stats(Device::cuda(device)).current_bytes, " bytes, the allocator has ",
              reserved_[device], " reserved (", cudaGetErrorString(status), ")");
    }
    reserved_[device] += static_cast<int64_t>(size);
    return block;
  }

  // Frees the cached blocks of one device (or all, device = -1).
  void release_cached(int device) {
    for (auto& [key, pool] : free_lists_) {
      if (device >= 0 && key.first != device) continue;
      DeviceGuard guard(key.first);
      cudaDeviceSynchronize();
      for (auto& [size, block] : pool) {
        cudaFree(block.ptr);
        reserved_[key.first] -= static_cast<int64_t>(size);
        cached_[key.first] -= static_cast<int64_t>(size);
      }
      pool.clear();
    }
  }

  std::mutex mutex_;
  std::map<PoolKey, std::multimap<size_t, Block>> free_lists_;
  std::unordered_map<void*, Block> in_use_;
  int64_t reserved_[kMaxDevicesPerType] = {};
  int64_t cached_[kMaxDevicesPerType] = {};
};

CachingAllocator& instance() {
  // Never destroyed: tensors in static objects may be freed after main returns.
  static CachingAllocator* allocator = new CachingAllocator();
  return *allocator;
}

}  // namespace

size_t round_size(size_t nbytes) {
  if (nbytes < kSmallLimit) return (nbytes + kSmallRound - 1) / kSmallRound * kSmallRound;
  return (nbytes + kLargeRound - 1) / kLargeRound * kLargeRound;
}

Allocator* caching_allocator() { return &instance(); }
int64_t reserved_bytes(int device) { return instance().reserved(device); }
int64_t cached_bytes(int device) { return instance().cached(device); }
void empty_cache() { instance().empty(); }

}  // namespace cuda
}  // namespace tessera
