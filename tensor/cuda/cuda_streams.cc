#include "tensor/cuda/cuda_streams.h"

#include "tensor/cuda/runtime.h"

namespace tessera {
namespace cuda {

namespace {

cudaStream_t as_stream(void* native) { return static_cast<cudaStream_t>(native); }
Event& as_event(void* native) { return *static_cast<Event*>(native); }

class CudaStreams final : public StreamBackend {
 public:
  void* create_stream(int index) override { return Stream::create(index).handle(); }
  void* current_stream(int index) override { return cuda::current_stream(index).handle(); }
  void synchronize_stream(int index, void* stream) override {
    Stream(index, as_stream(stream)).synchronize();
  }
  void* enter_stream(int index, void* stream) override {
    return new StreamGuard(Stream(index, as_stream(stream)));
  }
  void exit_stream(void* guard) override { delete static_cast<StreamGuard*>(guard); }
  void* enter_device(int index) override { return new DeviceGuard(index); }
  void exit_device(void* guard) override { delete static_cast<DeviceGuard*>(guard); }
  void* create_event(int /*index*/, bool timing) override { return new Event(timing); }
  void destroy_event(void* event) override { delete static_cast<Event*>(event); }
  void record_event(void* event, int index, void* stream) override {
    as_event(event).record(Stream(index, as_stream(stream)));
  }
  void block_on_event(void* event, int index, void* stream) override {
    as_event(event).block(Stream(index, as_stream(stream)));
  }
  bool query_event(void* event) override { return as_event(event).query(); }
  void synchronize_event(void* event) override { as_event(event).synchronize(); }
  float elapsed_ms(void* start, void* end) override {
    return as_event(start).elapsed_ms(as_event(end));
  }
};

}  // namespace

StreamBackend& stream_backend() {
  static CudaStreams streams;
  return streams;
}

}  // namespace cuda
}  // namespace tessera
