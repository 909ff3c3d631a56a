// The one error style of dist/'s library calls: MPI_CHECK (dist/mpi_check.h) and NCCL_CHECK
// (dist/nccl_check.h) turn a failed call into a tessera::Error that carries file:line, the call
// as written and the library's own words for what went wrong, like TS_CHECK does for tessera's
// own checks:
//
//   dist/process_group_mpi.cc:120: MPI error in MPI_Recv(...): MPI_ERR_TRUNCATE: message truncated
#pragma once

#include <string>

#include "tensor/check.h"

namespace tessera {
namespace dist {
namespace detail {

[[noreturn]] inline void library_fail(const char* library, const char* call,
                                      const std::string& what, const char* file, int line) {
  ::tessera::detail::throw_error(file, line,
                                 ::tessera::detail::str(library, " error in ", call, ": ", what));
}

}  // namespace detail
}  // namespace dist
}  // namespace tessera
