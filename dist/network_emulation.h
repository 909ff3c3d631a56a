// Network emulation: every message a process group sends takes at least
// latency + bytes / bandwidth, so one machine shows what a slower network does to a step.
//
//   NetworkEmulation{50, 10}: 50 us per message, 10 Gb/s (10^10 bits per second), so a 1 MB
//   message takes 50 us + 8e6 bits / 1e10 bits/s = 850 us.
//
// Where the delay goes depends on who waits for the message.
//
// A ring step (reduce-scatter, all-gather, all-reduce) sends right and receives from the left
// at once, on every rank, the ranks kept in step by the ring itself: the real transfer happens,
// then the communication thread waits out the remainder. A full-duplex link: one message time
// per step (never two), the real copy hidden under it:
//
//   rank r     post: Irecv from r-1, Isend to r+1 ==copy==| ....wait.... | step done
//   rank r-1   post: Irecv from r-2, Isend to r   ==copy==| ....wait.... |
//              |<------- L + b/B (b: the larger of the two directions) --->|
//
// Our own post stands for our left neighbour's, because the ring keeps them within a step of
// each other; a rank that enters late makes its right neighbour wait for the real data, after
// which the steps line up again (at most one message time per late entry goes uncharged).
//
// A broadcast's deeper ranks and a point-to-point receiver post long before their sender (a
// pipeline stage waits for its activations): waiting out the remainder on their own clocks would
// hand them the data as soon as it really arrives. Only the sender knows when the message was
// posted (ranks share no clock, a message carries no header), so the sender holds it for its
// flight time, then really sends it:
//
//   sender     post ----- held: L + b/B ----- MPI_Isend ==copy==| send done
//   receiver   post recv .... (waiting) .....................==| recv done
//              |<-------- >= L + b/B after the send was posted -------->|
//
// Both ends then complete no earlier than post + L + b/B; the price is that the real copy
// (shared memory here: 1-3 GB/s) adds to the emulated time instead of hiding under it.
//
// What each operation costs (N ranks, n bytes, msg(b) = L + b/B; the tests check these):
//   all_reduce        2 (N-1) steps of n/N bytes:       >= 2 (N-1) (L + n / (N B))
//   reduce_scatter    (N-1) steps (n = the input):      >= (N-1) (L + n / (N B))
//   all_gather        (N-1) steps (n = the output):     >= (N-1) (L + n / (N B))
//   broadcast         binomial tree, ceil(log2 N) rounds of the whole buffer: the root holds
//                     one msg(n) per child; the rank v places after the root has the data
//                     >= (floor(log2 v) + 1) msg(n) after the root posted, then sends to its own
//                     children one after another
//   barrier           ceil(log2 N) L (a dissemination barrier's rounds of empty messages)
//   send / recv       >= msg(b) after the send was posted. Sends to one peer share its link:
//                     each is transmitted (b/B) after the previous one, then flies L, so two
//                     back-to-back sends arrive >= L + (b1 + b2)/B after they were posted.
// Messages over 1 GiB go in pieces (MPI counts are ints); each piece is a message.
// Each group emulates its own links: two groups' traffic does not share bandwidth, nor do a
// group's collectives and its point-to-point sends.
//
// Waiting: sleep_until(deadline - 100 us), then yield until the deadline. sleep_until alone
// wakes 50-100 us late (timer slack, the scheduler), which at 10 us latencies would be the
// emulation's main error; yielding gives the core to any runnable thread while it waits (this
// machine has 2 cores and more threads than that).
//
// Off by default (0 latency, unlimited bandwidth), and then free: a test of a bool per message,
// no clock reads, no sleeps, no extra thread.
//
// The byte ledger records, beside each kind's bytes, the model's time of the messages this rank
// sent (the sum of L + b/B): deterministic, so it can be checked against theory;
// ledger().emulated_seconds() is the total. docs/NETWORK.md has the measured figures.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

namespace tessera {
namespace dist {

using EmulationClock = std::chrono::steady_clock;

struct NetworkEmulation {
  // Added to every message, in microseconds (>= 0).
  double latency_us = 0;
  // Gigabits (10^9 bits) per second (> 0); infinity means unlimited.
  double bandwidth_gbps = std::numeric_limits<double>::infinity();

  // Anything to emulate (a latency, or a finite bandwidth).
  bool enabled() const;
  // The model's time for one message of `bytes`: latency + bytes / bandwidth, in seconds.
  double message_seconds(int64_t bytes) const;
  // Throws, naming `caller` and the bad value, unless the latency is finite and >= 0 and the
  // bandwidth > 0 (infinity allowed).
  void check(const char* caller) const;
  // "off", or "latency 50 us, bandwidth 10 Gb/s".
  std::string str() const;
};

// Returns at `deadline` (not before): sleeps, then yields for the last 100 us.
void hold_until(EmulationClock::time_point deadline);
EmulationClock::time_point after_seconds(EmulationClock::time_point start, double seconds);

// Holds point-to-point sends for their flight time, then posts them, on a thread of its own
// (a send is posted on the caller's thread, which must not block). Each peer has a link: a
// message is transmitted (bytes / B) once the link is free, then flies for the latency, and
// only then is `post` run. Sends to a peer are posted in the order they were added (MPI matches
// messages between two ranks in order), whatever the settings did in between.
class DelayLine {
 public:
  DelayLine();
  ~DelayLine();  // posts everything held, each at its time, then joins
  DelayLine(const DelayLine&) = delete;
  DelayLine& operator=(const DelayLine&) = delete;

  // Schedules `post` (which must not throw) for a message of `bytes` to `peer`, posted now.
  void add(int peer, int64_t bytes, const NetworkEmulation& emulation, std::function<void()> post);
  // Posts everything held (each at its time) and stops the thread (idempotent).
  void shutdown();

 private:
  struct Link {
    EmulationClock::time_point free_at{};   // when the last message finished transmitting
    EmulationClock::time_point last_due{};  // when the last message is posted
  };
  void loop();

  std::mutex mutex_;
  std::condition_variable wake_;
  // Keyed by (due, sequence number): earliest first, ties in the order added.
  std::map<std::pair<EmulationClock::time_point, uint64_t>, std::function<void()>> held_;
  std::map<int, Link> links_;
  uint64_t added_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace dist
}  // namespace tessera
