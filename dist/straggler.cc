#include "dist/straggler.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <thread>

#include "tensor/check.h"

namespace tessera {
namespace dist {

StragglerEmulation::StragglerEmulation(int rank, double factor) : rank_(rank), factor_(factor) {
  TS_CHECK(rank >= 0, "StragglerEmulation: rank must be >= 0, got ", rank);
  TS_CHECK(std::isfinite(factor) && factor >= 1, "StragglerEmulation: factor must be a finite "
           "number >= 1, got ", factor);
}

StragglerEmulation StragglerEmulation::parse(const std::string& text) {
  const size_t colon = text.find(':');
  TS_CHECK(colon != std::string::npos && colon > 0 && colon + 1 < text.size(),
           "straggler '", text, "': expected RANK:FACTOR, e.g. 1:2");
  char* end = nullptr;
  const std::string rank_text = text.substr(0, colon), factor_text = text.substr(colon + 1);
  const long rank = std::strtol(rank_text.c_str(), &end, 10);
  TS_CHECK(*end == '\0' && rank >= 0 && rank < (1 << 24), "straggler '", text, "': rank '",
           rank_text, "' is not a rank");
  const double factor = std::strtod(factor_text.c_str(), &end);
  TS_CHECK(*end == '\0', "straggler '", text, "': factor '", factor_text, "' is not a number");
  return StragglerEmulation(static_cast<int>(rank), factor);
}

void StragglerEmulation::after_compute(int my_rank, double compute_seconds) {
  if (my_rank != rank_ || factor_ <= 1 || compute_seconds <= 0) return;
  const double extra = (factor_ - 1) * compute_seconds;
  std::this_thread::sleep_for(std::chrono::duration<double>(extra));
  slept_ += extra;
}

}  // namespace dist
}  // namespace tessera
