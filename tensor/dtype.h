// DType: the element types a Tensor can hold.
//
// f16 and bf16 are 2 bytes each; their C++ types (Half, BFloat16) and the compute type their
// kernels work in are in tensor/half.h, kept apart so that the many files that only name a dtype
// do not parse Eigen (a second of compile time per file).
#pragma once

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

// C++ type <-> DType (Half and BFloat16's in tensor/half.h).
template <typename T>
struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = kF32; };
template <> struct DTypeOf<double> { static constexpr DType value = kF64; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = kI64; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = kI32; };
template <> struct DTypeOf<uint8_t> { static constexpr DType value = kU8; };
template <> struct DTypeOf<bool> { static constexpr DType value = kBool; };

}  // namespace tessera
