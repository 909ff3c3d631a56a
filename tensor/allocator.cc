#include "tensor/allocator.h"

#include <atomic>
#include <cstdlib>
#include <iterator>
#include <map>
#include <mutex>
#include <new>

#include "tensor/check.h"

namespace tessera {

namespace {

constexpr size_t kCpuAlignment = 64;

struct Counters {
  std::atomic<int64_t> current{0};
  std::atomic<int64_t> peak{0};
  std::atomic<int64_t> count{0};
};

Counters& counters(Device device) {
  static Counters table[kNumDeviceTypes][kMaxDevicesPerType];
  return table[static_cast<int>(device.type())][device.index()];
}

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// Large blocks are cached (see allocator.h): sizes from kCacheMinBytes up round to whole pages,
// and a freed block waits in free_ for the next request of exactly its rounded size.
constexpr size_t kCacheMinBytes = size_t{1} << 20;
constexpr size_t kCacheMaxBytes = size_t{1} << 30;
constexpr size_t kPageBytes = 4096;

class CpuAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes, Device device) override {
    if (nbytes == 0) return nullptr;
    const size_t rounded = rounded_size(nbytes);
    void* ptr = take_cached(rounded);
    if (ptr == nullptr) ptr = std::aligned_alloc(kCpuAlignment, rounded);
    if (ptr == nullptr) {  // memory held by the cache may be what is missing
      empty_cache();
      ptr = std::aligned_alloc(kCpuAlignment, rounded);
    }
    TS_CHECK(ptr != nullptr, "CpuAllocator: out of memory allocating ", nbytes, " bytes (",
             memory_stats(device).current_bytes, " bytes in use)");
    record_allocation(device, static_cast<int64_t>(nbytes));
    return ptr;
  }

  void deallocate(void* ptr, size_t nbytes, Device device) override {
    if (ptr == nullptr) return;
    record_deallocation(device, static_cast<int64_t>(nbytes));
    const size_t rounded = rounded_size(nbytes);
    if (rounded < kCacheMinBytes || rounded > kCacheMaxBytes) return std::free(ptr);
    std::lock_guard<std::mutex> lock(mu_);
    // Makes room by freeing the smallest cached blocks first.
    while (cached_ + rounded > kCacheMaxBytes) {
      const auto it = free_.begin();
      cached_ -= it->first;
      std::free(it->second);
      free_.erase(it);
    }
    free_.emplace(rounded, ptr);
    cached_ += rounded;
  }

  int64_t cached_bytes() {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int64_t>(cached_);
  }

  void empty_cache() {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [size, ptr] : free_) std::free(ptr);
    free_.clear();
    cached_ = 0;
  }

 private:
  static size_t rounded_size(size_t nbytes) {
    const size_t rounded = round_up(nbytes, kCpuAlignment);
    return rounded < kCacheMinBytes ? rounded : round_up(rounded, kPageBytes);
  }

  void* take_cached(size_t rounded) {
    if (rounded < kCacheMinBytes) return nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    // The block freed last: the likeliest still in the caches.
    const auto range = free_.equal_range(rounded);
    if (range.first == range.second) return nullptr;
    const auto it = std::prev(range.second);
    void* ptr = it->second;
    free_.erase(it);
    cached_ -= rounded;
    return ptr;
  }

  std::mutex mu_;
  std::multimap<size_t, void*> free_;  // rounded size -> block
  size_t cached_ = 0;
};

// Never destroyed: tensors in other static objects may be freed after main returns.
CpuAllocator& cpu_allocator() {
  static CpuAllocator* cpu = new CpuAllocator;
  return *cpu;
}

Allocator* g_allocators[kNumDeviceTypes] = {nullptr, nullptr};

}  // namespace

Allocator* get_allocator(DeviceType type) {
  if (type == DeviceType::kCPU) return &cpu_allocator();
  Allocator* allocator = g_allocators[static_cast<int>(type)];
  TS_CHECK(allocator != nullptr,
           "no allocator for device type cuda: this binary was built without CUDA "
           "(build with --config=cuda)");
  return allocator;
}

void set_allocator(DeviceType type, Allocator* allocator) {
  g_allocators[static_cast<int>(type)] = allocator;
}

int64_t cpu_cached_bytes() { return cpu_allocator().cached_bytes(); }

void cpu_empty_cache() { cpu_allocator().empty_cache(); }

namespace {
Allocator* g_pinned_allocator = nullptr;
}

Allocator* get_pinned_allocator() {
  TS_CHECK(g_pinned_allocator != nullptr,
           "pinned memory needs the CUDA backend: this binary was built without CUDA "
           "(build with --config=cuda)");
  return g_pinned_allocator;
}

void set_pinned_allocator(Allocator* allocator) { g_pinned_allocator = allocator; }

MemoryStats memory_stats(Device device) {
  Counters& c = counters(device);
  MemoryStats stats;
  stats.current_bytes = c.current.load();
  stats.peak_bytes = c.peak.load();
  stats.num_allocations = c.count.load();
  return stats;
}

void reset_peak(Device device) {
  Counters& c = counters(device);
  c.peak.store(c.current.load());
}

void raise_peak(Device device, int64_t bytes) {
  Counters& c = counters(device);
  int64_t peak = c.peak.load();
  while (bytes > peak && !c.peak.compare_exchange_weak(peak, bytes)) {
  }
}

void record_allocation(Device device, int64_t nbytes) {
  Counters& c = counters(device);
  const int64_t now = c.current.fetch_add(nbytes) + nbytes;
  c.count.fetch_add(1);
  int64_t peak = c.peak.load();
  while (now > peak && !c.peak.compare_exchange_weak(peak, now)) {
  }
}

void record_deallocation(Device device, int64_t nbytes) {
  counters(device).current.fetch_sub(nbytes);
}

}  // namespace tessera
