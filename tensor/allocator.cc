#include "tensor/allocator.h"

#include <atomic>
#include <cstdlib>
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

class CpuAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes, Device device) override {
    if (nbytes == 0) return nullptr;
    const size_t rounded = (nbytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
    void* ptr = std::aligned_alloc(kCpuAlignment, rounded);
    TS_CHECK(ptr != nullptr, "CpuAllocator: out of memory allocating ", nbytes, " bytes (",
             memory_stats(device).current_bytes, " bytes in use)");
    record_allocation(device, static_cast<int64_t>(nbytes));
    return ptr;
  }
  void deallocate(void* ptr, size_t nbytes, Device device) override {
    if (ptr == nullptr) return;
    std::free(ptr);
    record_deallocation(device, static_cast<int64_t>(nbytes));
  }
};

Allocator* g_allocators[kNumDeviceTypes] = {nullptr, nullptr};

}  // namespace

Allocator* get_allocator(DeviceType type) {
  static CpuAllocator cpu;
  if (type == DeviceType::kCPU) return &cpu;
  Allocator* allocator = g_allocators[static_cast<int>(type)];
  TS_CHECK(allocator != nullptr,
           "no allocator for device type cuda: this binary was built without CUDA "
           "(build with --config=cuda)");
  return allocator;
}

void set_allocator(DeviceType type, Allocator* allocator) {
  g_allocators[static_cast<int>(type)] = allocator;
}

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
