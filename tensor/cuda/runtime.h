// The CUDA runtime as tessera uses it: devices, the current-device guard, streams and events.
//
// Every kernel runs on the *current stream* of its device, per host thread, which starts as
// the device's default stream (as in PyTorch). A StreamGuard makes another stream current for a
// scope: the NCCL process group runs its collectives on its own stream and orders them against
// compute with events (record on one stream, make the other wait), so the host never blocks in
// the hot path.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "tensor/device.h"

namespace tessera {
namespace cuda {

// Number of visible GPUs; 0 when there is no device or no driver (never throws).
int device_count();
// What the runtime said when device_count() is 0.
std::string unavailable_reason();
// Throws a clear error unless `device` is a CUDA device that exists.
void check_device(Device device);

// Makes `device` current for a scope and restores the previous one after.
class DeviceGuard {
 public:
  explicit DeviceGuard(Device device);
  explicit DeviceGuard(int index);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

// A handle to a CUDA stream on one device. Copies share the stream; the default-constructed
// handle for a device is its default (legacy) stream.
class Stream {
 public:
  Stream() = default;
  Stream(int device, cudaStream_t handle) : device_(device), handle_(handle) {}
  // A new stream that does not synchronize with the default stream, owned for the process'
  // lifetime (streams are few and long-lived: one per process group).
  static Stream create(int device, int priority = 0);

  int device() const { return device_; }
  cudaStream_t handle() const { return handle_; }
  void synchronize() const;
  bool operator==(const Stream& o) const { return device_ == o.device_ && handle_ == o.handle_; }

 private:
  int device_ = 0;
  cudaStream_t handle_ = nullptr;
};

// The calling thread's current stream for a device (the default stream unless a StreamGuard
// says otherwise).
Stream current_stream(int device);

class StreamGuard {
 public:
  explicit StreamGuard(const Stream& stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Stream previous_;
};

// A CUDA event (timing disabled unless asked): record() marks a point on a stream; block(s)
// makes stream s wait for that point without blocking the host; synchronize() blocks the host.
class Event {
 public:
  explicit Event(bool enable_timing = false);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  void record(const Stream& stream);
  void block(const Stream& stream) const;
  bool query() const;  // true when the recorded work has finished
  void synchronize() const;
  // Milliseconds between this event and a later one (both recorded, timing enabled).
  float elapsed_ms(const Event& later) const;
  cudaEvent_t handle() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
  int device_ = -1;
  bool timing_ = false;
};

}  // namespace cuda
}  // namespace tessera
