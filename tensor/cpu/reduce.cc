// CPU reductions over the rows of a contiguous [outer, inner] matrix.
//
// Sums accumulate in f64 (i64 for integers) over fixed blocks of kBlock elements whose partial
// sums are then added in order, so the result does not depend on how many threads ran.
#include <cmath>
#include <limits>
#include <vector>

#include "tensor/cpu/cpu_backend.h"
#include "tensor/cpu/dispatch.h"
#include "tensor/parallel.h"

namespace tessera {
namespace cpu {

namespace {

constexpr int64_t kBlock = 16384;

template <typename T>
using acc_t = std::conditional_t<std::is_floating_point_v<compute_t<T>>, double, int64_t>;

template <typename T>
acc_t<T> row_sum(const T* x, int64_t n) {
  acc_t<T> s = 0;
  for (int64_t j = 0; j < n; ++j) s += static_cast<acc_t<T>>(static_cast<compute_t<T>>(x[j]));
  return s;
}

// Sum of one long row, split into fixed blocks summed in parallel.
template <typename T>
acc_t<T> long_row_sum(const T* x, int64_t n) {
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<acc_t<T>> partial(blocks);
  parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      partial[b] = row_sum(x + b * kBlock, std::min(kBlock, n - b * kBlock));
    }
  });
  acc_t<T> s = 0;
  for (acc_t<T> p : partial) s += p;
  return s;
}

template <typename T>
void reduce_kernel(ReduceOp op, const Tensor& in, const Tensor& out, int64_t correction) {
  const int64_t outer = in.size(0), inner = in.size(1);
  const T* x = static_cast<const T*>(in.raw_data());
  using C = compute_t<T>;
  // The output is T, or i64 for arg-reductions and integer sums.
  T* out_t = out.dtype() == DTypeOf<T>::value ? static_cast<T*>(out.raw_data()) : nullptr;
  int64_t* out_i = out.dtype() == kI64 ? static_cast<int64_t*>(out.raw_data()) : nullptr;
  auto sum_of = [&](const T* row) {
    return outer == 1 ? long_row_sum(row, inner) : row_sum(row, inner);
  };
  const int64_t grain = std::max<int64_t>(1, kBlock / std::max<int64_t>(inner, 1));
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kMean: {
      parallel_for(outer, grain, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          const auto s = sum_of(x + r * inner);
          if (op == ReduceOp::kMean) {
            out_t[r] = T(static_cast<C>(static_cast<double>(s) / inner));
          } else if constexpr (std::is_floating_point_v<C>) {
            out_t[r] = T(static_cast<C>(s));
          } else {
            out_i[r] = static_cast<int64_t>(s);
          }
        }
      });
      break;
    }
    case ReduceOp::kVar: {
      parallel_for(outer, grain, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          const T* row = x + r * inner;
          const double m = static_cast<double>(sum_of(row)) / inner;
          double ss = 0;
          for (int64_t j = 0; j < inner; ++j) {
            const double d = static_cast<double>(static_cast<C>(row[j])) - m;
            ss += d * d;
          }
          const int64_t dof = inner - correction;
          out_t[r] = T(static_cast<C>(dof > 0 ? ss / dof
                                                      : std::numeric_limits<double>::quiet_NaN()));
        }
      });
      break;
    }
    case ReduceOp::kMax:
    case ReduceOp::kMin:
    case ReduceOp::kArgmax:
    case ReduceOp::kArgmin: {
      const bool want_max = op == ReduceOp::kMax || op == ReduceOp::kArgmax;
      const bool want_index = op == ReduceOp::kArgmax || op == ReduceOp::kArgmin;
      parallel_for(outer, grain, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          const T* row = x + r * inner;
          int64_t best = 0;
          C best_value = static_cast<C>(row[0]);
          for (int64_t j = 1; j < inner && best_value == best_value; ++j) {
            const C v = static_cast<C>(row[j]);
            // NaN wins (and stops the scan), as in PyTorch.
            if (v != v || (want_max ? v > best_value : v < best_value)) {
              best = j;
              best_value = v;
            }
          }
          if (want_index) {
            out_i[r] = best;
          } else {
            out_t[r] = row[best];
          }
        }
      });
      break;
    }
  }
}

}  // namespace

void CpuBackend::reduce(ReduceOp op, const Tensor& in, const Tensor& out, int64_t correction) {
  if (in.dtype() == kBool) {
    // Bool reduces as bytes (sum counts the trues).
    TS_CHECK(op != ReduceOp::kMean && op != ReduceOp::kVar, "reduce: mean/var of a bool tensor");
    const Tensor bytes = in.to(kU8);
    if (out.dtype() == kBool) {
      Tensor tmp = empty(out.shape(), kU8);
      reduce_kernel<uint8_t>(op, bytes, tmp, correction);
      copy(tmp, out);
    } else {
      reduce_kernel<uint8_t>(op, bytes, out, correction);
    }
    return;
  }
  switch (in.dtype()) {
    case kF32: return reduce_kernel<float>(op, in, out, correction);
    case kF64: return reduce_kernel<double>(op, in, out, correction);
    case kF16: return reduce_kernel<Half>(op, in, out, correction);
    case kBF16: return reduce_kernel<BFloat16>(op, in, out, correction);
    case kI64: return reduce_kernel<int64_t>(op, in, out, correction);
    case kI32: return reduce_kernel<int32_t>(op, in, out, correction);
    case kU8: return reduce_kernel<uint8_t>(op, in, out, correction);
    default: TS_FAIL("reduce: unsupported dtype ", in.dtype());
  }
}

}  // namespace cpu
}  // namespace tessera
