// CudaBackend convolutions on cuDNN: forward, backward-data and backward-filter.
//
// For each (direction, shapes, dtype, math mode) the algorithm is chosen once from cuDNN's
// heuristics (the best-ranked one that works within a bounded workspace) and cached. The
// workspace comes from the caching allocator as a tensor, so it shows in memory_stats().
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "tensor/accelerator.h"
#include "tensor/cuda/cuda_backend.h"
#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/handles.h"

namespace tessera {
namespace cuda {

namespace {

// The most workspace one convolution may use.
constexpr size_t kMaxWorkspaceBytes = size_t(1) << 30;

cudnnDataType_t cudnn_type(DType dtype) {
  switch (dtype) {
    case kF32: return CUDNN_DATA_FLOAT;
    case kF64: return CUDNN_DATA_DOUBLE;
    case kF16: return CUDNN_DATA_HALF;
    case kBF16: return CUDNN_DATA_BFLOAT16;
    default: TS_FAIL("conv2d on CUDA supports f32, f64, f16 and bf16, not ", dtype);
  }
}

// The descriptors of one convolution, destroyed with it.
struct Descriptors {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;

  Descriptors(const Tensor& input, const Tensor& weight, const Tensor& out,
              const Conv2dParams& p) {
    const cudnnDataType_t type = cudnn_type(input.dtype());
    auto dims = [](const Tensor& t) {
      std::vector<int> d;
      for (int64_t s : t.shape()) {
        TS_CHECK(s <= INT32_MAX, "cuDNN conv2d: dimension ", s, " does not fit in int");
        d.push_back(static_cast<int>(s));
      }
      return d;
    };
    const std::vector<int> xd = dims(input), yd = dims(out), wd = dims(weight);
    TS_CUDNN_CHECK(cudnnCreateTensorDescriptor(&x));
    TS_CUDNN_CHECK(cudnnCreateTensorDescriptor(&y));
    TS_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w));
    TS_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv));
    TS_CUDNN_CHECK(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, type, xd[0], xd[1], xd[2], xd[3]));
    TS_CUDNN_CHECK(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NCHW, type, yd[0], yd[1], yd[2], yd[3]));
    TS_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w, type, CUDNN_TENSOR_NCHW, wd[0], wd[1], wd[2], wd[3]));
    // Accumulate in f32 for the 16-bit types, in the data type otherwise.
    const cudnnDataType_t compute = type == CUDNN_DATA_DOUBLE ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
    TS_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(
        conv, static_cast<int>(p.padding[0]), static_cast<int>(p.padding[1]),
        static_cast<int>(p.stride[0]), static_cast<int>(p.stride[1]),
        static_cast<int>(p.dilation[0]), static_cast<int>(p.dilation[1]),
        CUDNN_CROSS_CORRELATION, compute));
    TS_CUDNN_CHECK(cudnnSetConvolutionGroupCount(conv, static_cast<int>(p.groups)));
    // Tensor cores for f16/bf16 always; for f32 only with allow_tf32() (FMA math forbids TF32).
    cudnnMathType_t math = CUDNN_DEFAULT_MATH;
    if (type == CUDNN_DATA_HALF || type == CUDNN_DATA_BFLOAT16) math = CUDNN_TENSOR_OP_MATH;
    if (type == CUDNN_DATA_FLOAT && !allow_tf32()) math = CUDNN_FMA_MATH;
    TS_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, math));
  }
  ~Descriptors() {
    cudnnDestroyConvolutionDescriptor(conv);
    cudnnDestroyFilterDescriptor(w);
    cudnnDestroyTensorDescriptor(y);
    cudnnDestroyTensorDescriptor(x);
  }
  Descriptors(const Descriptors&) = delete;
  Descriptors& operator=(const Descriptors&) = delete;
};

enum class Direction { kForward, kBackwardData, kBackwardFilter };

using AlgoKey = std::tuple<int, int, Shape, Shape, Shape, int64_t, int64_t, int64_t, int64_t,
                           int64_t, int64_t, int64_t, int, bool>;

struct Algo {
  int algo = 0;
  size_t workspace = 0;
};

AlgoKey key_of(Direction d, int device, const Tensor& input, const Tensor& weight,
               const Tensor& out, const Conv2dParams& p) {
  return {static_cast<int>(d), device, input.shape(), weight.shape(), out.shape(),
          p.stride[0], p.stride[1], p.padding[0], p.padding[1], p.dilation[0], p.dilation[1],
          p.groups, static_cast<int>(input.dtype()), allow_tf32()};
}

// Picks the best-ranked algorithm from cuDNN's heuristics that succeeds within the workspace
// bound; asked once per key.
template <typename Perf, typename GetFn>
Algo choose(GetFn get, const char* what) {
  constexpr int kCandidates = 16;
  Perf perf[kCandidates];
  int found = 0;
  TS_CUDNN_CHECK(get(kCandidates, &found, perf));
  for (int i = 0; i < found; ++i) {
    if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= kMaxWorkspaceBytes) {
      return {static_cast<int>(perf[i].algo), perf[i].memory};
    }
  }
  TS_FAIL("cuDNN found no ", what, " algorithm for this convolution within a ",
          kMaxWorkspaceBytes, "-byte workspace");
}

Algo cached_algo(const AlgoKey& key, Direction d, cudnnHandle_t h, const Descriptors& desc) {
  static std::mutex mutex;
  static std::map<AlgoKey, Algo> cache;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  Algo algo;
  switch (d) {
    case Direction::kForward:
      algo = choose<cudnnConvolutionFwdAlgoPerf_t>(
          [&](int n, int* found, cudnnConvolutionFwdAlgoPerf_t* perf) {
            return cudnnGetConvolutionForwardAlgorithm_v7(h, desc.x, desc.w, desc.conv, desc.y,
                                                          n, found, perf);
          },
          "forward");
      break;
    case Direction::kBackwardData:
      algo = choose<cudnnConvolutionBwdDataAlgoPerf_t>(
          [&](int n, int* found, cudnnConvolutionBwdDataAlgoPerf_t* perf) {
            return cudnnGetConvolutionBackwardDataAlgorithm_v7(h, desc.w, desc.y, desc.conv,
                                                               desc.x, n, found, perf);
          },
          "backward-data");
      break;
    case Direction::kBackwardFilter:
      algo = choose<cudnnConvolutionBwdFilterAlgoPerf_t>(
          [&](int n, int* found, cudnnConvolutionBwdFilterAlgoPerf_t* perf) {
            return cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, desc.x, desc.y, desc.conv,
                                                                 desc.w, n, found, perf);
          },
          "backward-filter");
      break;
  }
  std::lock_guard<std::mutex> lock(mutex);
  cache.emplace(key, algo);
  return algo;
}

Tensor workspace_for(const Algo& algo, Device device) {
  return empty({static_cast<int64_t>(algo.workspace)}, TensorOptions(kU8).device(device));
}

void* ptr(const Tensor& t) { return t.numel() > 0 ? t.raw_data() : nullptr; }

// Scalars are float for every data type but double.
struct Scalars {
  explicit Scalars(DType dtype) : wide(dtype == kF64) {}
  const void* one() const { return wide ? static_cast<const void*>(&one_d) : &one_f; }
  const void* zero() const { return wide ? static_cast<const void*>(&zero_d) : &zero_f; }
  bool wide;
  double one_d = 1, zero_d = 0;
  float one_f = 1, zero_f = 0;
};

// Everything one cuDNN convolution call needs, for the convolution x (*) w = y in `direction`:
// the handle on the current stream, descriptors, the cached algorithm, its workspace, scalars.
struct ConvCall {
  ConvCall(Direction direction, const Tensor& x, const Tensor& w, const Tensor& y,
           const Conv2dParams& p, const Tensor& written)
      : on(written),
        handle(cudnn_handle(written.device().index())),
        desc(x, w, y, p),
        algo(cached_algo(key_of(direction, written.device().index(), x, w, y, p), direction,
                         handle, desc)),
        workspace(workspace_for(algo, written.device())),
        scalars(x.dtype()) {}

  OnDevice on;
  cudnnHandle_t handle;
  Descriptors desc;
  Algo algo;
  Tensor workspace;
  Scalars scalars;
};

}  // namespace

void CudaBackend::conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias,
                         const Conv2dParams& p, const Tensor& out) {
  if (out.numel() == 0) return;
  ConvCall c(Direction::kForward, input, weight, out, p, out);
  const Scalars& s = c.scalars;
  TS_CUDNN_CHECK(cudnnConvolutionForward(
      c.handle, s.one(), c.desc.x, ptr(input), c.desc.w, ptr(weight), c.desc.conv,
      static_cast<cudnnConvolutionFwdAlgo_t>(c.algo.algo), ptr(c.workspace), c.algo.workspace,
      s.zero(), c.desc.y, ptr(out)));
  if (bias.defined()) {
    cudnnTensorDescriptor_t b = nullptr;
    TS_CUDNN_CHECK(cudnnCreateTensorDescriptor(&b));
    TS_CUDNN_CHECK(cudnnSetTensor4dDescriptor(b, CUDNN_TENSOR_NCHW, cudnn_type(bias.dtype()), 1,
                                              static_cast<int>(bias.numel()), 1, 1));
    const cudnnStatus_t status =
        cudnnAddTensor(c.handle, s.one(), b, ptr(bias), s.one(), c.desc.y, ptr(out));
    cudnnDestroyTensorDescriptor(b);
    TS_CUDNN_CHECK(status);
  }
}

void CudaBackend::conv2d_backward_input(const Tensor& grad_out, const Tensor& weight,
                                        const Conv2dParams& p, const Tensor& grad_in) {
  if (grad_in.numel() == 0) return;
  ConvCall c(Direction::kBackwardData, grad_in, weight, grad_out, p, grad_in);
  const Scalars& s = c.scalars;
  TS_CUDNN_CHECK(cudnnConvolutionBackwardData(
      c.handle, s.one(), c.desc.w, ptr(weight), c.desc.y, ptr(grad_out), c.desc.conv,
      static_cast<cudnnConvolutionBwdDataAlgo_t>(c.algo.algo), ptr(c.workspace),
      c.algo.workspace, s.zero(), c.desc.x, ptr(grad_in)));
}

void CudaBackend::conv2d_backward_weight(const Tensor& grad_out, const Tensor& input,
                                         const Conv2dParams& p, const Tensor& grad_weight) {
  if (grad_weight.numel() == 0) return;
  ConvCall c(Direction::kBackwardFilter, input, grad_weight, grad_out, p, grad_weight);
  const Scalars& s = c.scalars;
  TS_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
      c.handle, s.one(), c.desc.x, ptr(input), c.desc.y, ptr(grad_out), c.desc.conv,
      static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.algo.algo), ptr(c.workspace),
      c.algo.workspace, s.zero(), c.desc.w, ptr(grad_weight)));
}

}  // namespace cuda
}  // namespace tessera
