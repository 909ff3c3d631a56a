// Allocators and the memory statistics every byte is counted in.
//
// Each device type has one Allocator. Whatever it hands out is recorded in per-device counters
// (current and peak bytes), which are how ZeRO's and the pipeline's memory savings are measured:
// nothing may allocate tensor memory around them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/device.h"

namespace tessera {

struct MemoryStats {
  int64_t current_bytes = 0;  // bytes allocated now
  int64_t peak_bytes = 0;     // the most allocated at once since the last reset_peak
  int64_t num_allocations = 0;
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  // Returns memory for `nbytes` (64-byte aligned on the CPU); nbytes == 0 gives nullptr.
  virtual void* allocate(size_t nbytes, Device device) = 0;
  virtual void deallocate(void* ptr, size_t nbytes, Device device) = 0;
};

// The allocator for a device type; the CPU one always exists, the CUDA one once registered.
Allocator* get_allocator(DeviceType type);
// Installs the allocator for a device type (the CUDA backend does this at load time).
void set_allocator(DeviceType type, Allocator* allocator);

// The CPU allocator keeps freed blocks of 1 MiB and more (1 GiB in all at most, the smallest
// freed first to make room) and hands each to the next request of the same size, rounded up to
// whole 4 KiB pages, the block of that size freed last first (the likeliest still in the CPU's
// caches). Training allocates the same activation sizes every step, and memory fresh from the
// OS costs a page fault and a cleared page per 4 KiB. memory_stats() counts only memory in use,
// never the cache.
int64_t cpu_cached_bytes();
// Returns every cached CPU block to the C library.
void cpu_empty_cache();

// Page-locked host memory (counted as CPU memory) from which copies to a GPU run
// asynchronously; registered by the CUDA backend, an error in a CPU-only build.
Allocator* get_pinned_allocator();
void set_pinned_allocator(Allocator* allocator);

MemoryStats memory_stats(Device device);
// Makes the peak equal to the current figure, so the next peak is measured from here.
void reset_peak(Device device);
// Makes the peak at least `bytes`: a measurement nested in another's (the pipeline executor's
// per-list peak inside a run's) resets the peak, then gives back the peak it had hidden.
void raise_peak(Device device, int64_t bytes);

// For allocator implementations: count `nbytes` in or out of the device's statistics.
void record_allocation(Device device, int64_t nbytes);
void record_deallocation(Device device, int64_t nbytes);

}  // namespace tessera
