#include "tensor/dtype.h"

#include "tensor/check.h"

namespace tessera {

size_t element_size(DType dtype) {
  switch (dtype) {
    case kF32: return 4;
    case kF64: return 8;
    case kF16: return 2;
    case kBF16: return 2;
    case kI64: return 8;
    case kI32: return 4;
    case kU8: return 1;
    case kBool: return 1;
  }
  TS_INTERNAL_ASSERT(false, "unknown dtype ", static_cast<int>(dtype));
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case kF32: return "f32";
    case kF64: return "f64";
    case kF16: return "f16";
    case kBF16: return "bf16";
    case kI64: return "i64";
    case kI32: return "i32";
    case kU8: return "u8";
    case kBool: return "bool";
  }
  return "unknown";
}

bool is_half(DType dtype) { return dtype == kF16 || dtype == kBF16; }

bool is_floating(DType dtype) {
  return dtype == kF32 || dtype == kF64 || dtype == kF16 || dtype == kBF16;
}

const char* dtype_kind(DType dtype) {
  return is_floating(dtype) ? "floating-point" : dtype == kBool ? "bool" : "integer";
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  const bool fa = is_floating(a), fb = is_floating(b);
  if (fa && fb) {
    if (a == kF64 || b == kF64) return kF64;
    return kF32;  // f32 with anything narrower, or f16 with bf16
  }
  if (fa) return a;
  if (fb) return b;
  // Both integral (or bool): the wider wins; bool is the narrowest.
  auto rank = [](DType t) {
    switch (t) {
      case kBool: return 0;
      case kU8: return 1;
      case kI32: return 2;
      case kI64: return 3;
      default: return -1;
    }
  };
  return rank(a) > rank(b) ? a : b;
}

std::ostream& operator<<(std::ostream& os, DType dtype) { return os << dtype_name(dtype); }

}  // namespace tessera
