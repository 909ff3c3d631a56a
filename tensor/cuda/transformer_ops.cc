// CudaBackend: the transformer layers (the kernels are layer_norm.cu, gelu.cu, embedding.cu;
// the embedding's forward is index_select's kernel).
#include "tensor/cuda/cuda_backend.h"
#include "tensor/cuda/transformer_kernels.h"

namespace tessera {
namespace cuda {

namespace {
void* data_or_null(const Tensor& t) { return t.defined() ? t.raw_data() : nullptr; }
}  // namespace

void CudaBackend::layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias,
                             double eps, const Tensor& out, const Tensor& mean,
                             const Tensor& rstd) {
  OnDevice on(x);
  launch_layer_norm(x.raw_data(), weight.raw_data(), bias.raw_data(), eps, out.raw_data(),
                    mean.raw_data(), rstd.raw_data(), x.dtype(), x.size(0), x.size(1),
                    on.stream);
}

void CudaBackend::layer_norm_backward(const Tensor& grad_out, const Tensor& x,
                                      const Tensor& mean, const Tensor& rstd,
                                      const Tensor& weight, const Tensor& grad_in,
                                      const Tensor& grad_weight, const Tensor& grad_bias) {
  OnDevice on(x);
  const bool params = grad_weight.defined() || grad_bias.defined();
  // Per-chunk partial sums of the parameters' gradients (layer_norm.cu); freed when this call
  // returns, which the caching allocator orders after the kernels on this stream.
  const Tensor workspace =
      params ? empty({layer_norm_workspace_size(x.size(0), x.size(1))}, mean.options())
             : Tensor();
  launch_layer_norm_backward(grad_out.raw_data(), x.raw_data(), mean.raw_data(), rstd.raw_data(),
                             weight.raw_data(), data_or_null(grad_in), data_or_null(grad_weight),
                             data_or_null(grad_bias), data_or_null(workspace), x.dtype(),
                             x.size(0), x.size(1), on.stream);
}

void CudaBackend::gelu(const Tensor& in, const Tensor& out, GeluApproximate approximate) {
  OnDevice on(out);
  launch_gelu(in.raw_data(), out.raw_data(), approximate, in.dtype(), in.numel(), on.stream);
}

void CudaBackend::gelu_backward(const Tensor& grad_out, const Tensor& in, const Tensor& grad_in,
                                GeluApproximate approximate) {
  OnDevice on(grad_in);
  launch_gelu_backward(grad_out.raw_data(), in.raw_data(), grad_in.raw_data(), approximate,
                       in.dtype(), in.numel(), on.stream);
}

void CudaBackend::embedding_backward(const Tensor& grad_out, const Tensor& index,
                                     const Tensor& grad_weight) {
  OnDevice on(grad_weight);
  launch_embedding_backward(grad_out.raw_data(), index.data<int64_t>(), grad_weight.raw_data(),
                            grad_out.dtype(), grad_out.size(0), grad_out.size(1),
                            grad_weight.size(0), on.stream);
}

}  // namespace cuda
}  // namespace tessera
