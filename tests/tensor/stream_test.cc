// tensor/stream.h, the device-neutral streams and events: the CPU has none and says so; an event
// never recorded has nothing to wait for; and on a GPU (skipped without one) an event orders a
// side stream before the default stream, as the NCCL process group relies on.
#include <gtest/gtest.h>

#include "tensor/accelerator.h"
#include "tensor/ops.h"
#include "tensor/stream.h"
#include "tests/util/expect_error.h"

namespace tessera {
namespace {

using testing::expect_error;

TEST(Stream, TheCpuHasNoStreams) {
  expect_error([] { Stream::create(Device::cpu()); },
               "streams and events exist on CUDA devices, not on cpu");
  expect_error([] { current_stream(Device::cpu()); }, "not on cpu");
  Event never_recorded;
  EXPECT_TRUE(never_recorded.query());
  never_recorded.synchronize();  // nothing to wait for
  DeviceGuard cpu(Device::cpu());  // a no-op on the CPU
}

TEST(Stream, AMissingDeviceIsNamedWithTheReason) {
  check_device_exists(Device::cpu());
  if (cuda_is_available()) GTEST_SKIP() << "a GPU is present";
  expect_error([] { check_device_exists(Device::cuda(0)); },
               "cannot use cuda:0: " + cuda_unavailable_reason());
}

TEST(Stream, AnEventOrdersASideStreamBeforeTheDefaultStream) {
  if (!cuda_is_available()) GTEST_SKIP() << "no CUDA: " << cuda_unavailable_reason();
  const Device gpu = Device::cuda(0);
  const int64_t n = 1 << 24;
  Tensor x = zeros({n}, gpu);
  synchronize(gpu);  // the side stream does not wait for the default one
  const Stream side = Stream::create(gpu);
  Event done;
  {
    StreamGuard guard(side);
    EXPECT_EQ(current_stream(gpu), side);
    for (int i = 0; i < 20; ++i) x.fill_(static_cast<double>(i + 1));
    done.record(side);
  }
  EXPECT_EQ(current_stream(gpu).native_handle(), nullptr);  // the default stream again
  done.block(current_stream(gpu));
  EXPECT_EQ(sum(x).item(), 20.0 * n);
  EXPECT_TRUE(done.query());
}

}  // namespace
}  // namespace tessera
