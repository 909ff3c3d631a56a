// tensor/stream.h's StreamBackend for CUDA: the device-neutral Stream, Event and guards map
// onto this folder's runtime (runtime.h). A neutral stream's native handle is the cudaStream_t;
// a neutral event's is a cuda::Event, and a guard's a cuda::DeviceGuard or cuda::StreamGuard.
#pragma once

#include "tensor/stream.h"

namespace tessera {
namespace cuda {

// The one instance, returned by CudaBackend::streams().
StreamBackend& stream_backend();

}  // namespace cuda
}  // namespace tessera
