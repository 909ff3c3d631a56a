// The CUDA runtime layer: stream/event ordering, the device guard, and the caching allocator's
// size classes and cache. Built only under --config=cuda (cuda_skipped_test.cc stands in
// otherwise); skips, naming the reason, on a machine without a GPU.
#include <gtest/gtest.h>

#include "tensor/accelerator.h"
#include "tensor/cuda/caching_allocator.h"
#include "tensor/cuda/runtime.h"
#include "tensor/ops.h"

namespace tessera {
namespace {

class CudaRuntime : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_is_available()) GTEST_SKIP() << "no CUDA: " << cuda_unavailable_reason();
  }
};

TEST(CudaSizeClasses, RoundTo512BytesThenTo2MiB) {
  EXPECT_EQ(cuda::round_size(1), 512u);
  EXPECT_EQ(cuda::round_size(512), 512u);
  EXPECT_EQ(cuda::round_size(513), 1024u);
  EXPECT_EQ(cuda::round_size((1 << 20) + 1), size_t(2) << 20);
  EXPECT_EQ(cuda::round_size((2 << 20) + 1), size_t(4) << 20);
}

TEST_F(CudaRuntime, AnEventOrdersASideStreamBeforeTheDefaultStream) {
  const int64_t n = 1 << 24;
  Tensor x = zeros({n}, Device::cuda(0));
  synchronize(Device::cuda(0));  // the side stream does not wait for the default one
  cuda::Stream side = cuda::Stream::create(0);
  cuda::Event done;
  {
    cuda::StreamGuard guard(side);
    EXPECT_EQ(cuda::current_stream(0), side);
    // Several passes, so the side stream is still busy when the default stream is reached.
    for (int i = 0; i < 20; ++i) x.fill_(static_cast<double>(i + 1));
    done.record(side);
  }
  EXPECT_EQ(cuda::current_stream(0).handle(), nullptr);  // the default stream again
  done.block(cuda::current_stream(0));
  EXPECT_EQ(sum(x).item(), 20.0 * n);
  EXPECT_TRUE(done.query());
}

TEST_F(CudaRuntime, TimingEventsMeasureElapsedTime) {
  cuda::Event start(true), stop(true);
  start.record(cuda::current_stream(0));
  Tensor x = ones({1 << 20}, Device::cuda(0));
  for (int i = 0; i < 10; ++i) x = x * 1.0001;
  stop.record(cuda::current_stream(0));
  stop.synchronize();
  EXPECT_GE(start.elapsed_ms(stop), 0.0f);
  cuda::Event untimed;
  untimed.record(cuda::current_stream(0));
  EXPECT_THROW(untimed.elapsed_ms(stop), Error);
}

TEST_F(CudaRuntime, DeviceGuardRestoresTheCurrentDevice) {
  int before = -1, after = -1;
  cudaGetDevice(&before);
  { cuda::DeviceGuard guard(cuda::device_count() - 1); }
  cudaGetDevice(&after);
  EXPECT_EQ(before, after);
}

TEST_F(CudaRuntime, FreedBlocksAreCachedAndReused) {
  synchronize(Device::cuda(0));
  cuda::empty_cache();
  EXPECT_EQ(cuda::cached_bytes(0), 0);
  const int64_t reserved0 = cuda::reserved_bytes(0);
  { Tensor a = empty({3 << 20}, TensorOptions(kU8).device(Device::cuda(0))); }
  const int64_t reserved1 = cuda::reserved_bytes(0);
  EXPECT_EQ(reserved1 - reserved0, int64_t(4) << 20);  // 3 MiB rounds up to 4 MiB
  EXPECT_EQ(cuda::cached_bytes(0), int64_t(4) << 20);
  { Tensor b = empty({(3 << 20) + 100}, TensorOptions(kU8).device(Device::cuda(0))); }
  EXPECT_EQ(cuda::reserved_bytes(0), reserved1);  // the cached block served it
  cuda::empty_cache();
  EXPECT_EQ(cuda::cached_bytes(0), 0);
  EXPECT_EQ(cuda::reserved_bytes(0), reserved0);
}

}  // namespace
}  // namespace tessera
