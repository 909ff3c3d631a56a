#include "dist/collective_timeout.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <thread>

#include "tensor/check.h"

namespace tessera {
namespace dist {

namespace {

std::atomic<double> timeout_seconds{0.0};
thread_local const std::string* waiting_what = nullptr;
thread_local int waiting_peer = -1;

using Clock = std::chrono::steady_clock;

// Every thread's innermost wait, copied (the owner may change its string), for
// describe_waits() on another thread; and the last wait that ended in this process.
struct Wait {
  std::string what;
  int peer = -1;
  Clock::time_point since;
};
struct Registry {
  std::mutex mutex;
  std::map<std::thread::id, Wait> waits;
  Wait last;
  Clock::time_point last_ended;
  bool any_ended = false;
  // The wait that timed out on this rank (its error is ending the job), if one has.
  Wait timed_out;
  double timed_out_after = 0;
  bool any_timed_out = false;
};
Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: waits may end during exit
  return *r;
}

void record_wait(const std::string* what, int peer) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  const std::thread::id me = std::this_thread::get_id();
  if (what == nullptr) {
    auto it = r.waits.find(me);
    if (it == r.waits.end()) return;
    r.last = std::move(it->second);
    r.last_ended = Clock::now();
    r.any_ended = true;
    r.waits.erase(it);
    return;
  }
  r.waits[me] = Wait{*what, peer, Clock::now()};
}

std::string seconds_text(Clock::duration d) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", std::chrono::duration<double>(d).count());
  return text;
}

}  // namespace

std::string describe_waits() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  const Clock::time_point now = Clock::now();
  std::string out;
  for (const auto& [thread, w] : r.waits) {
    out += (out.empty() ? "" : "; ") + std::string("waiting ") + seconds_text(now - w.since) +
           " s in " + w.what + (w.peer >= 0 ? " for rank " + std::to_string(w.peer) : "");
  }
  if (!out.empty()) return out;
  if (r.any_timed_out) {  // its wait has unwound; its error is on its way to ending the job
    char after[32];
    std::snprintf(after, sizeof after, "%.1f", r.timed_out_after);
    return "timed out in " + r.timed_out.what +
           (r.timed_out.peer >= 0 ? " for rank " + std::to_string(r.timed_out.peer) : "") +
           " after " + after + " s (its own error ends the job)";
  }
  out = "not waiting for any rank (computing, or between collectives); ";
  if (!r.any_ended) return out + "no wait yet";
  return out + "its last wait, " + r.last.what + ", ended " + seconds_text(now - r.last_ended) +
         " s ago";
}

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
  record_wait(&what, peer);
}

WaitingFor::~WaitingFor() {
  waiting_what = previous_what_;
  waiting_peer = previous_peer_;
  record_wait(waiting_what, waiting_peer);  // the enclosing wait again, or none
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
  {
    // What this rank answers a desync query from now on (describe_waits).
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    r.timed_out = Wait{what, waiting_peer, Clock::now()};
    r.timed_out_after = waited_seconds;
    r.any_timed_out = true;
  }
  throw CollectiveTimeout(message);
}

}  // namespace dist
}  // namespace tessera
