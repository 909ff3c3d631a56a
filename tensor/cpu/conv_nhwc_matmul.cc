#include "tensor/cpu/conv_nhwc_matmul.h"

#include <algorithm>
#include <cstring>

#include "tensor/cpu/gemm_onednn.h"
#include "tensor/parallel.h"

namespace tessera {
namespace cpu {

namespace {

// Every activation channels-last (a tensor with 1x1 maps or one channel is NCHW too: the same
// bytes) and none empty (those keep the primitives' path).
bool all_channels_last(std::initializer_list<const Tensor*> activations) {
  for (const Tensor* a : activations) {
    if (!a->is_channels_last() || a->numel() == 0) return false;
  }
  return true;
}

// The largest im2col matrix made for a weight gradient: 64 MiB (ResNet-50's largest at batch 8
// is 14.5 MB; at batch 256 one would be 460 MB, where the primitive needs no such scratch).
constexpr int64_t kMaxColsBytes = int64_t{64} << 20;

bool one_by_one(const Shape& weight, const Conv2dParams& p) {
  return weight[2] == 1 && weight[3] == 1 && p.padding[0] == 0 && p.padding[1] == 0;
}

bool strided(const Conv2dParams& p) { return p.stride[0] > 1 || p.stride[1] > 1; }

// The positions a 1x1 convolution reads: x[:, :, ::s, ::s] (a view; x itself at stride 1).
Tensor sampled(const Tensor& x, const Conv2dParams& p) {
  if (!strided(p)) return x;
  return x.slice(2, 0, x.size(2), p.stride[0]).slice(3, 0, x.size(3), p.stride[1]);
}

// cols[P, KH * KW * C] from NHWC x: row (n, oh, ow), block (i, j) of C values the pixel the
// window's tap (i, j) reads, or zeros where it falls in the padding. Without dilation a
// window row's taps are neighbouring pixels, KW * C values in a row of x: one copy each.
Tensor im2col_nhwc(const Tensor& x, const Shape& weight, const Conv2dParams& p, int64_t ho,
                   int64_t wo) {
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  const int64_t kh = weight[2], kw = weight[3], row = kh * kw * c;
  const Tensor cols = empty({n * ho * wo, row}, kBF16);
  const auto* src = static_cast<const uint16_t*>(x.raw_data());
  auto* dst = static_cast<uint16_t*>(cols.raw_data());
  const auto zero = [](uint16_t* out, int64_t values) {
    std::memset(out, 0, static_cast<size_t>(values) * sizeof(uint16_t));
  };
  const auto copy = [](const uint16_t* in, uint16_t* out, int64_t values) {
    std::memcpy(out, in, static_cast<size_t>(values) * sizeof(uint16_t));
  };
  parallel_for(n * ho, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t img = r / ho, oh = r % ho;
      for (int64_t ow = 0; ow < wo; ++ow) {
        uint16_t* out = dst + (r * wo + ow) * row;
        const int64_t left = ow * p.stride[1] - p.padding[1];  // the first tap's column
        for (int64_t i = 0; i < kh; ++i, out += kw * c) {
          const int64_t ih = oh * p.stride[0] - p.padding[0] + i * p.dilation[0];
          if (ih < 0 || ih >= h) {
            zero(out, kw * c);
            continue;
          }
          const uint16_t* in_row = src + (img * h + ih) * w * c;
          if (p.dilation[1] == 1) {
            // Taps [j0, j1) fall inside the row; the rest in the padding.
            const int64_t j0 = std::clamp<int64_t>(-left, 0, kw);
            const int64_t j1 = std::clamp<int64_t>(w - left, j0, kw);
            zero(out, j0 * c);
            if (j1 > j0) copy(in_row + (left + j0) * c, out + j0 * c, (j1 - j0) * c);
            zero(out + j1 * c, (kw - j1) * c);
            continue;
          }
          for (int64_t j = 0; j < kw; ++j) {
            const int64_t iw = left + j * p.dilation[1];
            if (iw < 0 || iw >= w) {
              zero(out + j * c, c);
            } else {
              copy(in_row + iw * c, out + j * c, c);
            }
          }
        }
      }
    }
  });
  return cols;
}

// C[m, n] = op(A) B for bf16 row-major operands: A is [m, k] (or, transposed, stored [k, m]),
// B [k, n], C [m, n], each dense.
void gemm_bf16(bool trans_a, int64_t m, int64_t n, int64_t k, const Tensor& a, int64_t lda,
            const Tensor& b, const Tensor& c) {
  GemmArgs g;
  g.trans_a = trans_a;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = a.raw_data();
  g.b = b.raw_data();
  g.c = c.raw_data();
  g.lda = lda;
  g.ldb = n;
  g.ldc = n;
  g.dtype = kBF16;
  g.device = Device::cpu();
  gemm_bf16_onednn(g);
}

// What both passes need: native bf16, no groups, output channels, NHWC activations.
bool matmuls_apply(DType dtype, const Shape& weight, const Conv2dParams& p,
                   std::initializer_list<const Tensor*> activations) {
  return dtype == kBF16 && onednn_bf16_available() && p.groups == 1 && weight[0] > 0 &&
         all_channels_last(activations);
}

}  // namespace

bool conv_backward_input_as_matmul(DType dtype, const Shape& weight, const Conv2dParams& p,
                                   std::initializer_list<const Tensor*> activations) {
  return matmuls_apply(dtype, weight, p, activations) && one_by_one(weight, p);
}

bool conv_backward_weight_as_matmul(DType dtype, const Shape& input, const Shape& weight,
                                    const Conv2dParams& p,
                                    std::initializer_list<const Tensor*> activations) {
  if (!matmuls_apply(dtype, weight, p, activations)) return false;
  if (one_by_one(weight, p)) return true;
  // Larger kernels: pixels of 16 channels (32 bytes) or more to copy into cols, a shape where
  // the primitive measured slow (the header's figures), and cols of at most kMaxColsBytes.
  const int64_t ho = window_output_size(input[2], weight[2], p.stride[0], p.padding[0],
                                        p.dilation[0]);
  const int64_t wo = window_output_size(input[3], weight[3], p.stride[1], p.padding[1],
                                        p.dilation[1]);
  const int64_t cols_bytes = input[0] * ho * wo * weight[2] * weight[3] * input[1] * 2;
  return input[1] >= 16 && (strided(p) || ho * wo <= 64) && cols_bytes <= kMaxColsBytes;
}

void conv_backward_input_matmul(const Tensor& grad_out, const Tensor& weight,
                                const Conv2dParams& p, const Tensor& grad_in) {
  const int64_t positions = grad_out.size(0) * grad_out.size(2) * grad_out.size(3);
  const int64_t k = weight.size(0), c = weight.size(1);
  if (!strided(p)) return gemm_bf16(false, positions, c, k, grad_out, k, weight, grad_in);
  // The sampled positions' gradients, then zeros everywhere else.
  const Tensor dx = empty({grad_out.size(0), c, grad_out.size(2), grad_out.size(3)}, kBF16,
                          MemoryFormat::kChannelsLast);
  gemm_bf16(false, positions, c, k, grad_out, k, weight, dx);
  Tensor(grad_in).zero_();
  sampled(grad_in, p).copy_(dx);
}

void conv_backward_weight_matmul(const Tensor& grad_out, const Tensor& input,
                                 const Conv2dParams& p, const Tensor& grad_weight) {
  const int64_t positions = grad_out.size(0) * grad_out.size(2) * grad_out.size(3);
  const int64_t k = grad_weight.size(0), c = grad_weight.size(1);
  if (one_by_one(grad_weight.shape(), p)) {
    const Tensor x = sampled(input, p).contiguous(MemoryFormat::kChannelsLast);
    return gemm_bf16(true, k, c, positions, grad_out, k, x, grad_weight);
  }
  const int64_t kh = grad_weight.size(2), kw = grad_weight.size(3);
  const Tensor cols = im2col_nhwc(input, grad_weight.shape(), p, grad_out.size(2),
                                  grad_out.size(3));
  // dW in [K, KH, KW, C] order, then permuted (exactly) to [K, C, KH, KW].
  const Tensor dw = empty({k, kh, kw, c}, kBF16);
  gemm_bf16(true, k, kh * kw * c, positions, grad_out, k, cols, dw);
  Tensor(grad_weight).copy_(dw.permute({0, 3, 1, 2}));
}

}  // namespace cpu
}  // namespace tessera
