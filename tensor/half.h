// Half and BFloat16: the C++ types of f16 and bf16 elements, Eigen::half and Eigen::bfloat16
// (2 bytes each), and the type a kernel computes in for each storage type. The 2-byte floats are
// computed in f32 on the CPU: every kernel reads them into a float ("the compute type"), works,
// and rounds once on the way out.
//
// Only code that touches 2-byte elements includes this header (the CPU kernels and their
// rounding tests), and tessera.h for users' programs: it pulls in Eigen/Core, about a second of
// compile time per file.
#pragma once

#include <Eigen/Core>

#include "tensor/dtype.h"

namespace tessera {

using Half = Eigen::half;
using BFloat16 = Eigen::bfloat16;

template <> struct DTypeOf<Half> { static constexpr DType value = kF16; };
template <> struct DTypeOf<BFloat16> { static constexpr DType value = kBF16; };

// The type a kernel computes in for storage type T: f32 for the 2-byte floats, T otherwise.
template <typename T> struct ComputeType { using type = T; };
template <> struct ComputeType<Half> { using type = float; };
template <> struct ComputeType<BFloat16> { using type = float; };
template <typename T>
using compute_t = typename ComputeType<T>::type;

}  // namespace tessera
