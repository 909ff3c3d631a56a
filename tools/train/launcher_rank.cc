#include "tools/train/launcher_rank.h"

#include <cstdlib>

namespace tessera {
namespace train {

std::optional<int> launcher_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') continue;
    char* end = nullptr;
    const long rank = std::strtol(v, &end, 10);
    if (*end == '\0' && rank >= 0) return static_cast<int>(rank);
  }
  return std::nullopt;
}

}  // namespace train
}  // namespace tessera
