// CudaBackend: pooling and batch norm (the kernels are pool.cu and batch_norm.cu).
#include "tensor/cuda/cuda_backend.h"
#include "tensor/cuda/kernels.h"

namespace tessera {
namespace cuda {

namespace {

PoolArgs pool_args(const Tensor& in, const Tensor& out, const Pool2dParams* p) {
  PoolArgs a;
  a.planes = in.size(0) * in.size(1);
  a.h = in.size(2);
  a.w = in.size(3);
  a.oh = out.size(2);
  a.ow = out.size(3);
  if (p != nullptr) {
    a.kh = static_cast<int>(p->kernel[0]);
    a.kw = static_cast<int>(p->kernel[1]);
    a.sh = static_cast<int>(p->stride[0]);
    a.sw = static_cast<int>(p->stride[1]);
    a.ph = static_cast<int>(p->padding[0]);
    a.pw = static_cast<int>(p->padding[1]);
    a.count_include_pad = p->count_include_pad;
  }
  return a;
}

void* data_or_null(const Tensor& t) { return t.defined() ? t.raw_data() : nullptr; }

}  // namespace

void CudaBackend::max_pool2d(const Tensor& input, const Pool2dParams& p, const Tensor& out,
                             const Tensor& indices) {
  OnDevice on(out);
  launch_max_pool2d(input.raw_data(), out.raw_data(), indices.data<int64_t>(),
                    pool_args(input, out, &p), input.dtype(), on.stream);
}

void CudaBackend::max_pool2d_backward(const Tensor& grad_out, const Tensor& indices,
                                      const Tensor& grad_in) {
  OnDevice on(grad_in);
  fill(grad_in, 0.0);  // the kernel adds into grad_in (Backend: every element is written)
  launch_max_pool2d_backward(grad_out.raw_data(), indices.data<int64_t>(), grad_in.raw_data(),
                             pool_args(grad_in, grad_out, nullptr), grad_out.dtype(), on.stream);
}

void CudaBackend::avg_pool2d(const Tensor& input, const Pool2dParams& p, const Tensor& out) {
  OnDevice on(out);
  launch_avg_pool2d(input.raw_data(), out.raw_data(), pool_args(input, out, &p), input.dtype(),
                    on.stream);
}

void CudaBackend::avg_pool2d_backward(const Tensor& grad_out, const Pool2dParams& p,
                                      const Tensor& grad_in) {
  OnDevice on(grad_in);
  launch_avg_pool2d_backward(grad_out.raw_data(), grad_in.raw_data(),
                             pool_args(grad_in, grad_out, &p), grad_out.dtype(), on.stream);
}

void CudaBackend::adaptive_avg_pool2d(const Tensor& input, const Tensor& out) {
  OnDevice on(out);
  launch_adaptive_avg_pool2d(input.raw_data(), out.raw_data(), pool_args(input, out, nullptr),
                             input.dtype(), on.stream);
}

void CudaBackend::adaptive_avg_pool2d_backward(const Tensor& grad_out, const Tensor& grad_in) {
  OnDevice on(grad_in);
  launch_adaptive_avg_pool2d_backward(grad_out.raw_data(), grad_in.raw_data(),
                                      pool_args(grad_in, grad_out, nullptr), grad_out.dtype(),
                                      on.stream);
}

void CudaBackend::batch_norm_stats(const Tensor& x, const Tensor& mean, const Tensor& var) {
  OnDevice on(x);
  launch_batch_norm_stats(x.raw_data(), mean.raw_data(), var.raw_data(), x.dtype(), x.size(0),
                          x.size(1), x.size(2), on.stream);
}

void CudaBackend::batch_norm_apply(const Tensor& x, const Tensor& mean, const Tensor& invstd,
                                   const Tensor& weight, const Tensor& bias, const Tensor& out) {
  OnDevice on(x);
  launch_batch_norm_apply(x.raw_data(), mean.raw_data(), invstd.raw_data(), data_or_null(weight),
                          data_or_null(bias), out.raw_data(), x.dtype(), x.size(0), x.size(1),
                          x.size(2), on.stream);
}

void CudaBackend::batch_norm_backward(const Tensor& grad_out, const Tensor& x,
                                      const Tensor& mean, const Tensor& invstd,
                                      const Tensor& weight, bool training, const Tensor& grad_in,
                                      const Tensor& grad_weight, const Tensor& grad_bias) {
  OnDevice on(x);
  Tensor workspace = empty({2 * x.size(1)}, TensorOptions(kF64).device(x.device()));
  launch_batch_norm_backward(grad_out.raw_data(), x.raw_data(), mean.raw_data(),
                             invstd.raw_data(), data_or_null(weight), training,
                             data_or_null(grad_in), data_or_null(grad_weight),
                             data_or_null(grad_bias), workspace.data<double>(), x.dtype(),
                             x.size(0), x.size(1), x.size(2), on.stream);
}

}  // namespace cuda
}  // namespace tessera
