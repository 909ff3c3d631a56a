// Fused optimizer updates on CUDA: each element's parameter, gradient and state are read once
// and written back, applying the per-element rules of tensor/update_rules.h (shared with the
// CPU kernels). Also the loss scaler's unscale-and-check pass over the gradients.
//
// The multi-tensor forms follow apex's multi_tensor_apply: the tensors are cut into chunks of
// kChunk elements, and one launch covers up to kListTensors tensors and kListBlocks chunks,
// block b updating chunk block_chunk[b] of tensor block_tensor[b]. A model's hundred small
// parameters then cost a few launches instead of a hundred.
#include <algorithm>

#include "tensor/cuda/cuda_check_launch.h"
#include "tensor/cuda/device_types.cuh"
#include "tensor/cuda/kernels.h"
#include "tensor/update_rules.h"

namespace tessera {
namespace cuda {

namespace {

constexpr int kListTensors = 24;
constexpr int kListBlocks = 320;
constexpr int64_t kChunk = 65536;

// One element of each update: load in the compute type, apply the shared rule, store back.
template <typename T>
__device__ __forceinline__ void sgd_element(T* p, const T* g, T* b, int64_t i,
                                            const SgdRule<acc_t<T>>& rule) {
  using C = acc_t<T>;
  C buf = b != nullptr ? load(b[i]) : C(0);
  p[i] = store<T>(rule.step(load(p[i]), load(g[i]), &buf));
  if (b != nullptr) b[i] = store<T>(buf);
}

template <typename T>
__device__ __forceinline__ void adam_element(T* p, const T* g, T* m, T* v, T* vmax, int64_t i,
                                             const AdamRule<acc_t<T>>& rule) {
  using C = acc_t<T>;
  C pi = load(p[i]), mi = load(m[i]), vi = load(v[i]);
  C vmaxi = vmax != nullptr ? load(vmax[i]) : C(0);
  rule.step(pi, load(g[i]), mi, vi, vmaxi);
  p[i] = store<T>(pi);
  m[i] = store<T>(mi);
  v[i] = store<T>(vi);
  if (vmax != nullptr) vmax[i] = store<T>(vmaxi);
}

template <typename T>
__global__ void sgd_kernel(T* p, const T* g, T* b, SgdRule<acc_t<T>> k, int64_t n) {
  TS_GRID_STRIDE(i, n) { sgd_element(p, g, b, i, k); }
}

template <typename T>
__global__ void adam_kernel(T* p, const T* g, T* m, T* v, T* vmax, AdamRule<acc_t<T>> k,
                            int64_t n) {
  TS_GRID_STRIDE(i, n) { adam_element(p, g, m, v, vmax, i, k); }
}

// One launch's worth of a tensor list.
struct ListLaunch {
  ListSlot slots[kListTensors];
  unsigned char block_tensor[kListBlocks];
  int block_chunk[kListBlocks];
};

template <typename T>
__global__ void sgd_list_kernel(ListLaunch list, SgdRule<acc_t<T>> k) {
  const ListSlot& t = list.slots[list.block_tensor[blockIdx.x]];
  const int64_t begin = list.block_chunk[blockIdx.x] * kChunk;
  const int64_t end = min(begin + kChunk, t.numel);
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    sgd_element(static_cast<T*>(t.param), static_cast<const T*>(t.grad),
                static_cast<T*>(t.state[0]), i, k);
  }
}

template <typename T>
__global__ void adam_list_kernel(ListLaunch list, AdamRule<acc_t<T>> k) {
  const ListSlot& t = list.slots[list.block_tensor[blockIdx.x]];
  const int64_t begin = list.block_chunk[blockIdx.x] * kChunk;
  const int64_t end = min(begin + kChunk, t.numel);
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    adam_element(static_cast<T*>(t.param), static_cast<const T*>(t.grad),
                 static_cast<T*>(t.state[0]), static_cast<T*>(t.state[1]),
                 static_cast<T*>(t.state[2]), i, k);
  }
}

// g *= inv_scale over one chunk of a gradient; any inf/NaN sets *found_inf. Many threads may
// store 1 at once: they all store the same value, so no atomic is needed.
template <typename T>
__global__ void unscale_list_kernel(ListLaunch list, acc_t<T> inv_scale, float* found_inf) {
  const ListSlot& t = list.slots[list.block_tensor[blockIdx.x]];
  T* g = static_cast<T*>(t.param);
  const int64_t begin = list.block_chunk[blockIdx.x] * kChunk;
  const int64_t end = min(begin + kChunk, t.numel);
  bool found = false;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const acc_t<T> v = load(g[i]);
    found |= !isfinite(v);
    g[i] = store<T>(v * inv_scale);
  }
  if (found) *found_inf = 1.0f;
}

// Packs the slots into launches (a tensor may span several) and calls launch(list, blocks).
template <typename Launch>
void for_each_launch(const ListSlot* slots, int count, Launch launch) {
  ListLaunch list{};
  int tensors = 0, blocks = 0;
  for (int t = 0; t < count; ++t) {
    if (slots[t].numel == 0) continue;
    list.slots[tensors] = slots[t];
    const int64_t chunks = (slots[t].numel + kChunk - 1) / kChunk;
    for (int64_t c = 0; c < chunks; ++c) {
      list.block_tensor[blocks] = static_cast<unsigned char>(tensors);
      list.block_chunk[blocks] = static_cast<int>(c);
      ++blocks;
      const bool last_chunk = c + 1 == chunks;
      if (blocks == kListBlocks || (last_chunk && tensors + 1 == kListTensors)) {
        launch(list, blocks);
        blocks = 0;
        // A tensor cut off mid-way carries on in slot 0 of the next launch.
        if (!last_chunk) {
          list.slots[0] = slots[t];
          tensors = 0;
        } else {
          tensors = -1;
        }
      }
    }
    ++tensors;
  }
  if (blocks > 0) launch(list, blocks);
}

}  // namespace

void launch_sgd_update(void* param, const void* grad, void* momentum_buffer, DType dtype,
                       int64_t numel, const SgdUpdate& u, cudaStream_t s) {
  if (numel == 0) return;
  TS_CUDA_DISPATCH_FLOATING(dtype, "sgd_update", [&] {
    sgd_kernel<scalar_t><<<blocks_for(numel), kThreads, 0, s>>>(
        static_cast<scalar_t*>(param), static_cast<const scalar_t*>(grad),
        u.momentum != 0 ? static_cast<scalar_t*>(momentum_buffer) : nullptr,
        SgdRule<acc_t<scalar_t>>(u), numel);
  });
  check_launch("sgd_update");
}

void launch_adam_update(void* param, const void* grad, void* exp_avg, void* exp_avg_sq,
                        void* max_exp_avg_sq, DType dtype, int64_t numel, const AdamUpdate& u,
                        cudaStream_t s) {
  if (numel == 0) return;
  TS_CUDA_DISPATCH_FLOATING(dtype, "adam_update", [&] {
    adam_kernel<scalar_t><<<blocks_for(numel), kThreads, 0, s>>>(
        static_cast<scalar_t*>(param), static_cast<const scalar_t*>(grad),
        static_cast<scalar_t*>(exp_avg), static_cast<scalar_t*>(exp_avg_sq),
        u.amsgrad ? static_cast<scalar_t*>(max_exp_avg_sq) : nullptr,
        AdamRule<acc_t<scalar_t>>(u), numel);
  });
  check_launch("adam_update");
}

void launch_sgd_update_many(const ListSlot* slots, int count, DType dtype, const SgdUpdate& u,
                            cudaStream_t s) {
  TS_CUDA_DISPATCH_FLOATING(dtype, "sgd_update_many", [&] {
    const SgdRule<acc_t<scalar_t>> k(u);
    for_each_launch(slots, count, [&](const ListLaunch& list, int blocks) {
      sgd_list_kernel<scalar_t><<<blocks, kThreads, 0, s>>>(list, k);
    });
  });
  check_launch("sgd_update_many");
}

void launch_adam_update_many(const ListSlot* slots, int count, DType dtype, const AdamUpdate& u,
                             cudaStream_t s) {
  TS_CUDA_DISPATCH_FLOATING(dtype, "adam_update_many", [&] {
    const AdamRule<acc_t<scalar_t>> k(u);
    for_each_launch(slots, count, [&](const ListLaunch& list, int blocks) {
      adam_list_kernel<scalar_t><<<blocks, kThreads, 0, s>>>(list, k);
    });
  });
  check_launch("adam_update_many");
}

void launch_non_finite_check_and_unscale(const ListSlot* slots, int count, DType dtype,
                                         double inv_scale, float* found_inf, cudaStream_t s) {
  TS_CUDA_DISPATCH_FLOATING(dtype, "non_finite_check_and_unscale", [&] {
    const acc_t<scalar_t> inv = static_cast<acc_t<scalar_t>>(inv_scale);
    for_each_launch(slots, count, [&](const ListLaunch& list, int blocks) {
      unscale_list_kernel<scalar_t><<<blocks, kThreads, 0, s>>>(list, inv, found_inf);
    });
  });
  check_launch("non_finite_check_and_unscale");
}

}  // namespace cuda
}  // namespace tessera
