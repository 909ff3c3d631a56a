// Errors that say what and why.
//
// TS_CHECK(cond, parts...) throws tessera::Error carrying file:line and the message built from
// `parts` (anything streamable, plus std::vector which prints as [a, b, c]). Use it for every
// user-facing check: the message names the op and the values involved, e.g.
//   TS_CHECK(a.size(1) == b.size(0), "matmul: inner dimensions differ: ", a.shape(), " x ",
//            b.shape());
// TS_INTERNAL_ASSERT is for invariants of tessera itself; a failure is a bug in tessera.
#pragma once

#include <ostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace tessera {

class Error : public std::runtime_error {
 public:
  Error(const std::string& message, const char* file, int line);
  // The message without the "file:line: " prefix.
  const std::string& message() const { return message_; }

 private:
  std::string message_;
};

namespace detail {

template <typename T>
void put(std::ostream& os, const T& value) {
  os << value;
}

template <typename T>
void put(std::ostream& os, const std::vector<T>& values) {
  os << '[';
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) os << ", ";
    put(os, values[i]);
  }
  os << ']';
}

template <typename... Args>
std::string str(const Args&... args) {
  std::ostringstream ss;
  (put(ss, args), ...);
  return ss.str();
}

[[noreturn]] void throw_error(const char* file, int line, const std::string& message);

}  // namespace detail
}  // namespace tessera

#define TS_CHECK(cond, ...)                                                              \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      ::tessera::detail::throw_error(__FILE__, __LINE__, ::tessera::detail::str(__VA_ARGS__)); \
    }                                                                                    \
  } while (0)

// Throws unconditionally; for the end of a chain of cases.
#define TS_FAIL(...) ::tessera::detail::throw_error(__FILE__, __LINE__, ::tessera::detail::str(__VA_ARGS__))

#define TS_INTERNAL_ASSERT(cond, ...)                                                       \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      ::tessera::detail::throw_error(                                                       \
          __FILE__, __LINE__,                                                               \
          ::tessera::detail::str("internal error (a bug in tessera): ", #cond, " ", ##__VA_ARGS__)); \
    }                                                                                       \
  } while (0)
