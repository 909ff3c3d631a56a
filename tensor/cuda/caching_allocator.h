// The CUDA caching allocator: device memory for tensors, never managed memory.
//
// cudaMalloc and cudaFree are slow and synchronize the device, so freed blocks are kept in free
// lists per (device, stream) and handed out again to requests of the same size class made on
// the same stream. Reuse on the same stream is safe without any synchronization: the stream
// runs the new owner's kernels after the old owner's. (A tensor used on another stream, like a
// NCCL bucket, must stay referenced until that stream's work has been joined back; the NCCL
// process group's Work holds its tensors until wait().)
//
// Size classes: requests round up to 512 bytes below 1 MiB and to 2 MiB multiples above, and a
// cached block is reused for a request whose class is at most 1/8 smaller. Every allocation is
// counted in memory_stats(device) at its requested size, like the CPU allocator, so ZeRO's
// savings read the same on both; reserved_bytes() adds what the cache holds. When cudaMalloc
// fails, the cache is emptied and the call retried once before the error.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/allocator.h"

namespace tessera {
namespace cuda {

Allocator* caching_allocator();

// Bytes obtained from cudaMalloc on `device` (in use plus cached).
int64_t reserved_bytes(int device);
// Bytes sitting in the free lists of `device`.
int64_t cached_bytes(int device);
// Returns every cached block of every device to CUDA (waits for the devices first).
void empty_cache();

// The size class a request of `nbytes` rounds up to (exposed for tests).
size_t round_size(size_t nbytes);

}  // namespace cuda
}  // namespace tessera
