// MPI_CHECK: turns an MPI error code into a tessera::Error with MPI's own error string
// (dist/library_check.h). Communicators use MPI_ERRORS_RETURN, so errors come back as codes
// instead of aborting.
#pragma once

#include <mpi.h>

#include <string>

#include "dist/library_check.h"

namespace tessera {
namespace dist {
namespace detail {
[[noreturn]] inline void mpi_fail(int code, const char* call, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  library_fail("MPI", call, std::string(text, length), file, line);
}
}  // namespace detail
}  // namespace dist
}  // namespace tessera

#define MPI_CHECK(expr)                                                             \
  do {                                                                              \
    const int mpi_check_code_ = (expr);                                             \
    if (mpi_check_code_ != MPI_SUCCESS) {                                           \
      ::tessera::dist::detail::mpi_fail(mpi_check_code_, #expr, __FILE__, __LINE__); \
    }                                                                               \
  } while (0)
