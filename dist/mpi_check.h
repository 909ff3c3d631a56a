// MPI_CHECK: turns an MPI error code into a tessera::Error with MPI's own error string.
// (Communicators use MPI_ERRORS_RETURN, so errors come back as codes instead of aborting.)
#pragma once

#include <mpi.h>

#include "tensor/check.h"

namespace tessera {
namespace dist {
namespace detail {
[[noreturn]] inline void mpi_fail(int code, const char* expr, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  ::tessera::detail::throw_error(file, line,
                                 ::tessera::detail::str("MPI error in ", expr, ": ",
                                                        std::string(text, length)));
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
