// DType: the element types a Tensor can hold.
//
// f16 and bf16 are stored as Eigen::half / Eigen::bfloat16 (2 bytes each) and computed in f32
// on the CPU: every kernel reads them into a float ("the compute type"), works, and rounds once
// on the way out.
#pragma once

#include <Eigen/Core>
#include <cstddef>
#include <cstdint>
#include <ostream>

#include "tensor/kinds.h"

namespace tessera {


inline constexpr DType kF32 = DType::kF32;
inline constexpr DType kF64 = DType::kF64;
inline constexpr DType kF16 = DType::kF16;
inline constexpr DType kBF16 = DType::kBF16;
inline constexpr DType kI64 = DType::kI64;
inline constexpr DType kI32 = DType::kI32;
inline constexpr DType kU8 = DType::kU8;
inline constexpr DType kBool = DType::kBool;

using Half = Eigen::half;
using BFloat16 = Eigen::bfloat16;

size_t element_size(DType dtype);
const char* dtype_name(DType dtype);
bool is_floating(DType dtype);
// f16 or bf16: the half-width floats autocast computes in and masters are kept for.
bool is_half(DType dtype);
// "floating-point", "integer" or "bool". Loading a saved tensor converts its precision within a
// kind (f16 into f32, i32 into i64) but never across kinds: an f32 tensor relabelled i32 is the
// same bytes read as garbage, so loaders compare kinds.
const char* dtype_kind(DType dtype);
// The dtype both operands of a binary op are converted to (NumPy/PyTorch-like: float beats
// integer, wider beats narrower; f16 with bf16 gives f32).
DType promote_types(DType a, DType b);

std::ostream& operator<<(std::ostream& os, DType dtype);

// C++ type <-> DType.
template <typename T>
struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = kF32; };
template <> struct DTypeOf<double> { static constexpr DType value = kF64; };
template <> struct DTypeOf<Half> { static constexpr DType value = kF16; };
template <> struct DTypeOf<BFloat16> { static constexpr DType value = kBF16; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = kI64; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = kI32; };
template <> struct DTypeOf<uint8_t> { static constexpr DType value = kU8; };
template <> struct DTypeOf<bool> { static constexpr DType value = kBool; };

// The type a kernel computes in for storage type T: f32 for the 2-byte floats, T otherwise.
template <typename T> struct ComputeType { using type = T; };
template <> struct ComputeType<Half> { using type = float; };
template <> struct ComputeType<BFloat16> { using type = float; };
template <typename T>
using compute_t = typename ComputeType<T>::type;

}  // namespace tessera
