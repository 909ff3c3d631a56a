#include "tools/train/restart_count.h"

#include <cstdlib>
#include <string>

#include "tensor/check.h"

namespace tessera {
namespace train {

std::optional<int> restart_count() {
  const char* v = std::getenv("TESSERA_RESTART_COUNT");
  if (v == nullptr || *v == '\0') return std::nullopt;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  TS_CHECK(*end == '\0' && n >= 0, "train: TESSERA_RESTART_COUNT='", v,
           "' (set by tools/launch) is not a count >= 0");
  return static_cast<int>(n);
}

}  // namespace train
}  // namespace tessera
