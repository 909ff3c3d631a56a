// Tensor metadata, views sharing storage, contiguous(), casts, allocator statistics.
#include "tensor/tensor.h"

#include <gtest/gtest.h>

#include "tensor/allocator.h"
#include "tensor/ops.h"

namespace tessera {
namespace {

Tensor iota(const Shape& shape, DType dtype = kF32) {
  return arange(0, static_cast<double>(numel(shape)), 1, dtype).view(shape);
}

TEST(Tensor, ContiguousStridesAndMetadata) {
  Tensor t = zeros({2, 3, 4});
  EXPECT_EQ(t.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(t.strides(), (Shape{12, 4, 1}));
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.dtype(), kF32);
  EXPECT_EQ(t.device(), Device::cpu());
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.nbytes(), 96u);
}

TEST(Tensor, ViewsShareStorage) {
  Tensor t = iota({3, 4});
  Tensor row = t.select(0, 1);  // [4, 5, 6, 7]
  EXPECT_EQ(row.to_vector<float>(), (std::vector<float>{4, 5, 6, 7}));
  row.fill_(-1);
  EXPECT_EQ(t.at({1, 2}), -1);
  Tensor col = t.narrow(1, 2, 1);  // column 2
  EXPECT_EQ(col.shape(), (Shape{3, 1}));
  EXPECT_EQ(col.to_vector<float>(), (std::vector<float>{2, -1, 10}));
  EXPECT_FALSE(col.is_contiguous());
}

TEST(Tensor, TransposePermuteAndContiguous) {
  Tensor t = iota({2, 3});
  Tensor tt = t.t();
  EXPECT_EQ(tt.shape(), (Shape{3, 2}));
  EXPECT_FALSE(tt.is_contiguous());
  EXPECT_EQ(tt.contiguous().to_vector<float>(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  Tensor c = t.contiguous();
  EXPECT_EQ(c.storage(), t.storage());  // already contiguous: no copy
  Tensor p = iota({2, 3, 4}).permute({2, 0, 1});
  EXPECT_EQ(p.shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(p.at({3, 1, 2}), 1 * 12 + 2 * 4 + 3);
}

TEST(Tensor, ReshapeViewsWhenPossibleAndCopiesOtherwise) {
  Tensor t = iota({4, 6});
  Tensor v = t.view({2, 2, -1});
  EXPECT_EQ(v.shape(), (Shape{2, 2, 6}));
  EXPECT_EQ(v.storage(), t.storage());
  Tensor tr = t.t();  // [6, 4], not contiguous
  EXPECT_THROW(tr.view({24}), Error);
  Tensor r = tr.reshape({24});
  EXPECT_NE(r.storage(), t.storage());
  EXPECT_EQ(r.at({1}), 6);  // tr[0][1] = t[1][0]
  // Splitting a transposed dim is still a view.
  Tensor split = tr.view({2, 3, 4});
  EXPECT_EQ(split.storage(), t.storage());
  EXPECT_EQ(split.at({1, 0, 2}), t.at({2, 3}));
}

TEST(Tensor, ExpandSqueezeUnsqueezeSlice) {
  Tensor t = iota({3});
  Tensor e = t.unsqueeze(0).expand({4, 3});
  EXPECT_EQ(e.strides(), (Shape{0, 1}));
  EXPECT_EQ(e.at({3, 2}), 2);
  EXPECT_EQ(t.unsqueeze(1).shape(), (Shape{3, 1}));
  EXPECT_EQ(zeros({1, 3, 1}).squeeze().shape(), (Shape{3}));
  EXPECT_EQ(zeros({1, 3, 1}).squeeze(2).shape(), (Shape{1, 3}));
  Tensor s = iota({10}).slice(0, 1, 8, 3);  // 1, 4, 7
  EXPECT_EQ(s.to_vector<float>(), (std::vector<float>{1, 4, 7}));
  EXPECT_THROW(t.expand({4, 2}), Error);
}

TEST(Tensor, CastsBetweenAllDtypes) {
  Tensor t = from_vector<float>({-1.5f, 0.0f, 2.25f, 3.0f}, {4});
  for (DType d : {kF64, kF16, kBF16, kI64, kI32}) {
    Tensor back = t.to(d).to(kF32);
    const std::vector<float> v = back.to_vector<float>();
    if (is_floating(d)) {
      EXPECT_EQ(v, (std::vector<float>{-1.5f, 0.0f, 2.25f, 3.0f})) << dtype_name(d);
    } else {
      EXPECT_EQ(v, (std::vector<float>{-1, 0, 2, 3})) << dtype_name(d);
    }
  }
  EXPECT_EQ(t.to(kBool).to(kF32).to_vector<float>(), (std::vector<float>{1, 0, 1, 1}));
  EXPECT_EQ(from_vector<uint8_t>({200, 7}, {2}).to(kF32).to_vector<float>(),
            (std::vector<float>{200, 7}));
  // f16 rounds to 11 significant bits; bf16 to 8.
  EXPECT_EQ(scalar_tensor(1.0 + 1.0 / 2048, kF64).to(kF16).item(), 1.0);
  EXPECT_EQ(scalar_tensor(1.0 + 1.0 / 128, kF64).to(kBF16).item(), 1.0 + 1.0 / 128);
}

TEST(Tensor, CopyBroadcastsAndConverts) {
  Tensor dst = zeros({2, 3}, kF64);
  dst.copy_(from_vector<float>({1, 2, 3}, {3}));
  EXPECT_EQ(dst.to_vector<double>(), (std::vector<double>{1, 2, 3, 1, 2, 3}));
  Tensor strided = zeros({3, 2}).t();
  strided.copy_(iota({2, 3}));
  EXPECT_EQ(strided.at({1, 2}), 5);
}

TEST(Tensor, AllocatorCountsCurrentAndPeak) {
  const Device cpu = Device::cpu();
  const int64_t before = memory_stats(cpu).current_bytes;
  reset_peak(cpu);
  {
    Tensor a = empty({1000}, kF32);
    EXPECT_EQ(memory_stats(cpu).current_bytes, before + 4000);
    Tensor b = empty({500}, kF64);
    EXPECT_EQ(memory_stats(cpu).current_bytes, before + 8000);
  }
  EXPECT_EQ(memory_stats(cpu).current_bytes, before);
  EXPECT_EQ(memory_stats(cpu).peak_bytes, before + 8000);
  reset_peak(cpu);
  EXPECT_EQ(memory_stats(cpu).peak_bytes, before);
}

TEST(Tensor, CpuAllocatorReusesLargeFreedBlocks) {
  const Device cpu = Device::cpu();
  cpu_empty_cache();
  EXPECT_EQ(cpu_cached_bytes(), 0);
  const int64_t before = memory_stats(cpu).current_bytes;
  const int64_t n = (1 << 18) + 1000;  // f32: 1 MiB + 4000 bytes
  void* first = nullptr;
  {
    Tensor a = empty({n}, kF32);
    first = a.raw_data();
  }
  // Freed, the block waits in the cache (whole pages) and is not counted as in use.
  const int64_t rounded = (n * 4 + 4095) / 4096 * 4096;
  EXPECT_EQ(cpu_cached_bytes(), rounded);
  EXPECT_EQ(memory_stats(cpu).current_bytes, before);
  {
    // The next request of the same rounded size gets the same block; another size does not.
    Tensor b = empty({n + 10}, kF32);
    EXPECT_EQ(b.raw_data(), first);
    EXPECT_EQ(cpu_cached_bytes(), 0);
    EXPECT_EQ(memory_stats(cpu).current_bytes, before + (n + 10) * 4);
    Tensor c = empty({2 * n}, kF32);
    EXPECT_NE(c.raw_data(), first);
  }
  EXPECT_EQ(cpu_cached_bytes(), rounded + (2 * n * 4 + 4095) / 4096 * 4096);
  // Small blocks go straight back to the C library.
  { Tensor small = empty({1000}, kF32); }
  EXPECT_EQ(cpu_cached_bytes(), rounded + (2 * n * 4 + 4095) / 4096 * 4096);
  cpu_empty_cache();
  EXPECT_EQ(cpu_cached_bytes(), 0);
}

// Of several cached blocks of one size, a request gets the one freed last (still warm in the
// caches), then the one freed before it.
TEST(Tensor, CpuAllocatorHandsOutTheBlockFreedLastFirst) {
  cpu_empty_cache();
  const int64_t n = 1 << 18;  // f32: 1 MiB
  void* freed_first = nullptr;
  void* freed_last = nullptr;
  {
    Tensor a = empty({n}, kF32), b = empty({n}, kF32);
    freed_first = a.raw_data();
    freed_last = b.raw_data();
    a = Tensor();  // a's block goes into the cache first, b's at the end of the scope
  }
  Tensor c = empty({n}, kF32);
  EXPECT_EQ(c.raw_data(), freed_last);
  Tensor d = empty({n}, kF32);
  EXPECT_EQ(d.raw_data(), freed_first);
  c = Tensor();
  d = Tensor();
  cpu_empty_cache();
}

TEST(Tensor, StorageIsSixtyFourByteAligned) {
  for (int n : {1, 3, 17, 1000}) {
    Tensor t = empty({n}, kU8);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % 64, 0u);
  }
}

TEST(Tensor, StorageReleaseAndRematerializeInPlace) {
  Tensor t = ones({256});
  Tensor view = t.narrow(0, 10, 5);
  const int64_t before = memory_stats(Device::cpu()).current_bytes;
  t.storage()->release();
  EXPECT_EQ(memory_stats(Device::cpu()).current_bytes, before - 1024);
  EXPECT_THROW(t.raw_data(), Error);
  t.storage()->materialize();
  EXPECT_EQ(memory_stats(Device::cpu()).current_bytes, before);
  t.fill_(7);
  EXPECT_EQ(view.at({0}), 7);  // the view sees the new bytes
}

TEST(Tensor, ErrorsNameTheOpAndValues) {
  try {
    zeros({2, 3}).view({4, 2});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("view: shape [4, 2] is invalid for input of shape [2, 3]"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(zeros({2}).select(0, 2), Error);
  EXPECT_THROW(zeros({2}).transpose(0, 1), Error);
  EXPECT_THROW(zeros({2}).item(), Error);
  EXPECT_THROW(Device::parse("tpu"), Error);
  EXPECT_THROW(empty({2}, Device::cuda(0)), Error);  // CPU-only build: clear message
}

}  // namespace
}  // namespace tessera
