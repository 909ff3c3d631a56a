#include "dist/collective_timeout.h"

#include <atomic>
#include <cmath>
#include <cstdio>

#include "tensor/check.h"

namespace tessera {
namespace dist {

namespace {

std::atomic<double> timeout_seconds{0.0};
thread_local const std::string* waiting_what = nullptr;
thread_local int waiting_peer = -1;

}  // namespace

void set_collective_timeout(double seconds) {
  TS_CHECK(std::isfinite(seconds) && seconds >= 0, "collective timeout: ", seconds,
           " seconds (0 for none, or a positive number)");
  timeout_seconds.store(seconds);
}

double collective_timeout() { return timeout_seconds.load(); }

WaitingFor::WaitingFor(const std::string& what, int peer)
    : previous_what_(waiting_what), previous_peer_(waiting_peer) {
  waiting_what = &what;
  waiting_peer = peer;
}

WaitingFor::~WaitingFor() {
  waiting_what = previous_what_;
  waiting_peer = previous_peer_;
}

void check_collective_timeout(double waited_seconds) {
  const double limit = timeout_seconds.load(std::memory_order_relaxed);
  if (limit <= 0 || waited_seconds <= limit) return;
  const std::string what = waiting_what ? *waiting_what : std::string("a message");
  char waited[32], limit_text[32];
  std::snprintf(waited, sizeof waited, "%.1f", waited_seconds);
  std::snprintf(limit_text, sizeof limit_text, "%g", limit);
  std::string message = "collective timeout: " + what + " has waited " + waited + " s";
  if (waiting_peer >= 0) {
    const std::string peer = std::to_string(waiting_peer);
    message += " for a message from rank " + peer + " (timeout " + limit_text + " s): rank " +
               peer + " never joined it, is stuck before it, or is at another collective";
  } else {
    message += std::string(" (timeout ") + limit_text + " s)";
  }
  throw CollectiveTimeout(message);
}

}  // namespace dist
}  // namespace tessera
