// Pinned (page-locked) host memory: Tensor::pin_memory() copies a CPU tensor into it, and a copy
// from it to a GPU is an asynchronous DMA on the current stream instead of a staged, blocking
// one.
//
// Blocks are cached by size like device memory. Because a copy may still be reading a block
// after its tensor is freed, every async copy records an event on its stream against the
// block (record_use), and a freed block is handed out again only once those events finished.
// Pinned bytes count as CPU memory in memory_stats().
#pragma once

#include "tensor/allocator.h"
#include "tensor/cuda/runtime.h"

namespace tessera {
namespace cuda {

Allocator* pinned_allocator();

// Marks pinned block `ptr` (any address inside it) as in use by work queued on `stream`.
// Returns false when ptr is not pinned memory from this allocator.
bool record_pinned_use(const void* ptr, const Stream& stream);

}  // namespace cuda
}  // namespace tessera
