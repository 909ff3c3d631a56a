#include "dist/network_emulation.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "tensor/check.h"

namespace tessera {
namespace dist {

namespace {

// The last stretch of a wait is yielded away rather than slept (see the header).
constexpr auto kSpin = std::chrono::microseconds(100);

double latency_seconds(const NetworkEmulation& e) { return e.latency_us * 1e-6; }

// bytes / bandwidth; 0 for unlimited bandwidth (x / inf).
double transmit_seconds(const NetworkEmulation& e, int64_t bytes) {
  return static_cast<double>(bytes) * 8.0 / (e.bandwidth_gbps * 1e9);
}

}  // namespace

bool NetworkEmulation::enabled() const { return latency_us > 0 || std::isfinite(bandwidth_gbps); }

double NetworkEmulation::message_seconds(int64_t bytes) const {
  return latency_seconds(*this) + transmit_seconds(*this, bytes);
}

void NetworkEmulation::check(const char* caller) const {
  TS_CHECK(std::isfinite(latency_us) && latency_us >= 0, caller,
           ": network latency must be a finite number of microseconds >= 0, got latency_us = ",
           latency_us);
  TS_CHECK(bandwidth_gbps > 0, caller,
           ": network bandwidth must be > 0 Gb/s (infinity for unlimited), got bandwidth_gbps = ",
           bandwidth_gbps);
}

std::string NetworkEmulation::str() const {
  if (!enabled()) return "off";
  std::ostringstream ss;
  ss << "latency " << latency_us << " us, bandwidth ";
  if (std::isfinite(bandwidth_gbps)) {
    ss << bandwidth_gbps << " Gb/s";
  } else {
    ss << "unlimited";
  }
  return ss.str();
}

EmulationClock::time_point after_seconds(EmulationClock::time_point start, double seconds) {
  // Rounded up: a hold is never shorter than the model's time.
  using std::chrono::ceil;
  return start + ceil<EmulationClock::duration>(std::chrono::duration<double>(seconds));
}

void hold_until(EmulationClock::time_point deadline) {
  if (EmulationClock::now() + kSpin < deadline) std::this_thread::sleep_until(deadline - kSpin);
  while (EmulationClock::now() < deadline) std::this_thread::yield();
}

DelayLine::DelayLine() : thread_([this] { loop(); }) {}

DelayLine::~DelayLine() { shutdown(); }

void DelayLine::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void DelayLine::add(int peer, int64_t bytes, const NetworkEmulation& emulation,
                    std::function<void()> post) {
  const EmulationClock::time_point now = EmulationClock::now();
  const bool on = emulation.enabled();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    TS_CHECK(!stop_, "send: the process group has been shut down");
    Link& link = links_[peer];
    // Transmitted once the link is free, then in flight for the latency. The due time never
    // goes back (settings may have changed since the last send), so a peer's sends stay in order.
    link.free_at = after_seconds(std::max(now, link.free_at),
                                 on ? transmit_seconds(emulation, bytes) : 0);
    link.last_due = std::max(link.last_due,
                             after_seconds(link.free_at, on ? latency_seconds(emulation) : 0));
    held_.emplace(std::make_pair(link.last_due, added_++), std::move(post));
  }
  wake_.notify_all();
}

void DelayLine::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    wake_.wait(lock, [&] { return stop_ || !held_.empty(); });
    if (held_.empty()) return;  // stopped, and everything held was posted
    const EmulationClock::time_point due = held_.begin()->first.first;
    const EmulationClock::time_point now = EmulationClock::now();
    if (now < due) {
      if (due - now > kSpin) {
        // Woken early by a message added meanwhile (it may be due sooner): look again.
        wake_.wait_until(lock, due - kSpin);
      } else {
        lock.unlock();
        hold_until(due);
        lock.lock();
      }
      continue;
    }
    std::function<void()> post = std::move(held_.begin()->second);
    held_.erase(held_.begin());
    lock.unlock();
    post();
    post = nullptr;  // drops the buffers it kept, outside the lock
    lock.lock();
  }
}

}  // namespace dist
}  // namespace tessera
