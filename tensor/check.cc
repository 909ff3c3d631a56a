#include "tensor/check.h"

namespace tessera {

namespace {
std::string with_location(const std::string& message, const char* file, int line) {
  return std::string(file) + ":" + std::to_string(line) + ": " + message;
}
}  // namespace

Error::Error(const std::string& message, const char* file, int line)
    : std::runtime_error(with_location(message, file, line)), message_(message) {}

namespace detail {
void throw_error(const char* file, int line, const std::string& message) {
  throw Error(message, file, line);
}
}  // namespace detail

}  // namespace tessera
