#include "tensor/stream.h"

#include "tensor/backend.h"
#include "tensor/check.h"

namespace tessera {

namespace {

StreamBackend& streams_of(Device device) {
  StreamBackend* streams = backend(device).streams();
  TS_CHECK(streams != nullptr, "streams and events exist on CUDA devices, not on ", device);
  return *streams;
}

}  // namespace

Stream Stream::create(Device device) {
  return Stream(device, streams_of(device).create_stream(device.index()));
}

void Stream::synchronize() const {
  streams_of(device_).synchronize_stream(device_.index(), native_);
}

Stream current_stream(Device device) {
  return Stream(device, streams_of(device).current_stream(device.index()));
}

StreamGuard::StreamGuard(const Stream& stream)
    : device_(stream.device()),
      state_(streams_of(device_).enter_stream(device_.index(), stream.native_handle())) {}

StreamGuard::~StreamGuard() { streams_of(device_).exit_stream(state_); }

DeviceGuard::DeviceGuard(Device device) : device_(device) {
  if (device.is_cuda()) state_ = streams_of(device).enter_device(device.index());
}

DeviceGuard::~DeviceGuard() {
  if (state_ != nullptr) streams_of(device_).exit_device(state_);
}

Event::~Event() {
  if (native_ != nullptr) streams_of(device_).destroy_event(native_);
}

void Event::record(const Stream& stream) {
  StreamBackend& streams = streams_of(stream.device());
  if (native_ == nullptr) {
    native_ = streams.create_event(stream.device().index(), timing_);
    device_ = stream.device();
  }
  TS_CHECK(device_ == stream.device(), "Event::record: the event belongs to ", device_,
           ", the stream to ", stream.device());
  streams.record_event(native_, stream.device().index(), stream.native_handle());
}

void Event::block(const Stream& stream) const {
  if (native_ == nullptr) return;  // never recorded: nothing to wait for
  streams_of(stream.device()).block_on_event(native_, stream.device().index(),
                                             stream.native_handle());
}

bool Event::query() const { return native_ == nullptr || streams_of(device_).query_event(native_); }

void Event::synchronize() const {
  if (native_ != nullptr) streams_of(device_).synchronize_event(native_);
}

float Event::elapsed_ms(const Event& later) const {
  TS_CHECK(timing_ && later.timing_, "Event::elapsed_ms: both events need enable_timing");
  TS_CHECK(native_ != nullptr && later.native_ != nullptr,
           "Event::elapsed_ms: both events must have been recorded");
  TS_CHECK(device_ == later.device_, "Event::elapsed_ms: events on ", device_, " and ",
           later.device_);
  return streams_of(device_).elapsed_ms(native_, later.native_);
}

}  // namespace tessera
