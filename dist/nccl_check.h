// NCCL_CHECK: turns an NCCL status into a tessera::Error with NCCL's own error string and its
// last error message (dist/library_check.h), as MPI_CHECK does for MPI.
#pragma once

#include <nccl.h>

#include <string>

#include "dist/library_check.h"

namespace tessera {
namespace dist {
namespace detail {
[[noreturn]] inline void nccl_fail(ncclResult_t status, const char* call, const char* file,
                                   int line) {
  const char* last = ncclGetLastError(nullptr);
  library_fail("NCCL", call,
               std::string(ncclGetErrorString(status)) + " (" + (last ? last : "") + ")", file,
               line);
}
}  // namespace detail
}  // namespace dist
}  // namespace tessera

#define NCCL_CHECK(expr)                                                               \
  do {                                                                                 \
    const ncclResult_t nccl_check_status_ = (expr);                                    \
    if (nccl_check_status_ != ncclSuccess) {                                           \
      ::tessera::dist::detail::nccl_fail(nccl_check_status_, #expr, __FILE__, __LINE__); \
    }                                                                                  \
  } while (0)
