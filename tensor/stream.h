// Streams and events, device-neutral: how code outside tensor/ (the NCCL process group, say)
// orders work on a device without including a backend's headers.
//
// A stream is a queue of work on one device; work on different streams may overlap. Every op
// runs on the *current stream* of its device, per host thread (at first the device's default
// stream, as in PyTorch); a StreamGuard makes another stream current for a scope. An event marks
// a point on a stream: record() places it, block(other) makes another stream wait for that point
// without blocking the host, synchronize() blocks the host. That is how a communication stream
// is ordered against compute with no host wait in the hot path:
//
//   compute stream:  ... grad ready --record(ready)--> ...            --block(done)--> use
//   comm stream:          block(ready) --> all-reduce --record(done)-->
//
// The CPU has no streams (its work runs in issue order on the host): asking for one is an error.
// CUDA's implementation lives in tensor/cuda (StreamBackend below, from Backend::streams()).
#pragma once

#include "tensor/device.h"

namespace tessera {

// A handle to a stream on one device. Copies share the stream. native_handle() is the
// backend's own (a cudaStream_t for CUDA; null is the default stream).
class Stream {
 public:
  Stream() = default;
  Stream(Device device, void* native) : device_(device), native_(native) {}
  // A new stream, owned for the process' lifetime (streams are few and long-lived: one per
  // process group). On CUDA it does not synchronize with the default stream.
  static Stream create(Device device);

  Device device() const { return device_; }
  void* native_handle() const { return native_; }
  void synchronize() const;  // blocks the host until the stream's work is done
  bool operator==(const Stream& o) const { return device_ == o.device_ && native_ == o.native_; }

 private:
  Device device_;
  void* native_ = nullptr;
};

// The calling thread's current stream on `device`.
Stream current_stream(Device device);

// Makes `stream` current on its device for a scope.
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Device device_;
  void* state_;  // the backend's guard
};

// Makes `device` the current device of its type for a scope (a no-op for the CPU).
class DeviceGuard {
 public:
  explicit DeviceGuard(Device device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  Device device_;
  void* state_ = nullptr;  // the backend's guard
};

// An event, bound to a device at its first record(); before that block() and synchronize() have
// nothing to wait for and query() is true. Timing is off unless asked.
class Event {
 public:
  explicit Event(bool enable_timing = false) : timing_(enable_timing) {}
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  void record(const Stream& stream);
  void block(const Stream& stream) const;
  bool query() const;  // true when the recorded work has finished
  void synchronize() const;
  // Milliseconds between this event and a later one (both recorded, timing enabled).
  float elapsed_ms(const Event& later) const;

 private:
  Device device_;
  void* native_ = nullptr;  // the backend's event
  bool timing_;
};

// For backends: what a device with streams implements (Backend::streams()). Streams and events
// are opaque pointers here; guards are objects the backend allocates on enter and frees on exit.
class StreamBackend {
 public:
  virtual ~StreamBackend() = default;
  virtual void* create_stream(int index) = 0;
  virtual void* current_stream(int index) = 0;
  virtual void synchronize_stream(int index, void* stream) = 0;
  virtual void* enter_stream(int index, void* stream) = 0;
  virtual void exit_stream(void* guard) = 0;  // never throws
  virtual void* enter_device(int index) = 0;
  virtual void exit_device(void* guard) = 0;  // never throws
  virtual void* create_event(int index, bool timing) = 0;
  virtual void destroy_event(void* event) = 0;  // never throws
  virtual void record_event(void* event, int index, void* stream) = 0;
  virtual void block_on_event(void* event, int index, void* stream) = 0;
  virtual bool query_event(void* event) = 0;
  virtual void synchronize_event(void* event) = 0;
  virtual float elapsed_ms(void* start, void* end) = 0;
};

}  // namespace tessera
