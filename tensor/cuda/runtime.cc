#include "tensor/cuda/runtime.h"

#include <array>
#include <mutex>

#include "tensor/cuda/cuda_check.h"

namespace tessera {
namespace cuda {

namespace {

struct DeviceQuery {
  int count = 0;
  std::string reason;
};

// Asked once: the runtime's answer does not change during a process.
const DeviceQuery& query_devices() {
  static const DeviceQuery query = [] {
    DeviceQuery q;
    const cudaError_t status = cudaGetDeviceCount(&q.count);
    if (status != cudaSuccess) {
      q.count = 0;
      q.reason = std::string("no usable CUDA device: cudaGetDeviceCount returned ") +
                 cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")";
      cudaGetLastError();  // clear the sticky error so later calls are not confused by it
    } else if (q.count == 0) {
      q.reason = "no CUDA device: cudaGetDeviceCount found 0 devices";
    }
    return q;
  }();
  return query;
}

thread_local std::array<cudaStream_t, kMaxDevicesPerType> t_current_streams{};

}  // namespace

int device_count() { return query_devices().count; }

std::string unavailable_reason() { return query_devices().reason; }

void check_device(Device device) {
  TS_CHECK(device.is_cuda(), "expected a CUDA device, got ", device);
  const int count = device_count();
  TS_CHECK(count > 0, "cannot use ", device, ": ", unavailable_reason());
  TS_CHECK(device.index() >= 0 && device.index() < count, "cannot use ", device, ": only ",
           count, " CUDA device(s) are visible");
}

DeviceGuard::DeviceGuard(Device device) : DeviceGuard(device.index()) {}

DeviceGuard::DeviceGuard(int index) {
  TS_CUDA_CHECK(cudaGetDevice(&previous_));
  if (previous_ != index) TS_CUDA_CHECK(cudaSetDevice(index));
}

DeviceGuard::~DeviceGuard() {
  int now = -1;
  if (cudaGetDevice(&now) == cudaSuccess && now != previous_) cudaSetDevice(previous_);
}

Stream Stream::create(int device, int priority) {
  DeviceGuard guard(device);
  cudaStream_t handle = nullptr;
  TS_CUDA_CHECK(cudaStreamCreateWithPriority(&handle, cudaStreamNonBlocking, priority));
  return Stream(device, handle);
}

void Stream::synchronize() const {
  DeviceGuard guard(device_);
  TS_CUDA_CHECK(cudaStreamSynchronize(handle_));
}

Stream current_stream(int device) {
  TS_CHECK(device >= 0 && device < kMaxDevicesPerType, "current_stream: bad device index ",
           device);
  return Stream(device, t_current_streams[device]);
}

StreamGuard::StreamGuard(const Stream& stream) : previous_(current_stream(stream.device())) {
  t_current_streams[stream.device()] = stream.handle();
}

StreamGuard::~StreamGuard() { t_current_streams[previous_.device()] = previous_.handle(); }

Event::Event(bool enable_timing) : timing_(enable_timing) {}

Event::~Event() {
  if (event_ != nullptr) {
    DeviceGuard guard(device_);
    cudaEventDestroy(event_);
  }
}

void Event::record(const Stream& stream) {
  DeviceGuard guard(stream.device());
  if (event_ == nullptr) {
    TS_CUDA_CHECK(cudaEventCreateWithFlags(
        &event_, timing_ ? cudaEventDefault : cudaEventDisableTiming));
    device_ = stream.device();
  }
  TS_CHECK(device_ == stream.device(), "Event::record: the event belongs to cuda:", device_,
           ", the stream to cuda:", stream.device());
  TS_CUDA_CHECK(cudaEventRecord(event_, stream.handle()));
}

void Event::block(const Stream& stream) const {
  if (event_ == nullptr) return;  // never recorded: nothing to wait for
  DeviceGuard guard(stream.device());
  TS_CUDA_CHECK(cudaStreamWaitEvent(stream.handle(), event_, 0));
}

bool Event::query() const {
  if (event_ == nullptr) return true;
  const cudaError_t status = cudaEventQuery(event_);
  if (status == cudaErrorNotReady) return false;
  TS_CUDA_CHECK(status);
  return true;
}

void Event::synchronize() const {
  if (event_ != nullptr) TS_CUDA_CHECK(cudaEventSynchronize(event_));
}

float Event::elapsed_ms(const Event& later) const {
  TS_CHECK(timing_ && later.timing_, "Event::elapsed_ms: both events need enable_timing");
  TS_CHECK(event_ != nullptr && later.event_ != nullptr,
           "Event::elapsed_ms: both events must have been recorded");
  float ms = 0;
  TS_CUDA_CHECK(cudaEventElapsedTime(&ms, event_, later.event_));
  return ms;
}

}  // namespace cuda
}  // namespace tessera
