#include "tools/train/fault_injection.h"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "tensor/check.h"

namespace tessera {
namespace train {

FaultInjection FaultInjection::parse(const std::string& text) {
  const size_t a = text.find(':');
  const size_t b = a == std::string::npos ? a : text.find(':', a + 1);
  TS_CHECK(b != std::string::npos, "inject-fault '", text,
           "': expected crash:RANK:STEP or stall:RANK:STEP");
  const std::string kind = text.substr(0, a), rank = text.substr(a + 1, b - a - 1),
                    step = text.substr(b + 1);
  TS_CHECK(kind == "crash" || kind == "stall", "inject-fault '", text, "': the kind is crash or "
           "stall, got '", kind, "'");
  char* end = nullptr;
  const long r = std::strtol(rank.c_str(), &end, 10);
  TS_CHECK(!rank.empty() && *end == '\0' && r >= 0 && r < (1 << 24), "inject-fault '", text,
           "': rank '", rank, "' is not a rank");
  const long long s = std::strtoll(step.c_str(), &end, 10);
  TS_CHECK(!step.empty() && *end == '\0' && s >= 1, "inject-fault '", text, "': step '", step,
           "' is not a step >= 1");
  FaultInjection f;
  f.kind_ = kind == "crash" ? Kind::kCrash : Kind::kStall;
  f.rank_ = static_cast<int>(r);
  f.step_ = s;
  return f;
}

void FaultInjection::after_step(int my_rank, int64_t step) const {
  if (my_rank != rank_ || step != step_) return;
  std::fprintf(stderr, "[rank %d] --inject-fault: %s at step %lld\n", my_rank,
               kind_ == Kind::kCrash ? "crashing" : "stalling", static_cast<long long>(step));
  std::fflush(stderr);
  if (kind_ == Kind::kCrash) std::raise(SIGKILL);
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(3600));
}

}  // namespace train
}  // namespace tessera
