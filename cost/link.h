// Link: the alpha-beta model of one network link, the cost model every collective time in
// cost/ is built from (Hockney's model; NCCL's tuner uses the same two numbers per algorithm):
//
//   a message of b bytes takes   alpha + b / beta       alpha: latency (s), beta: bytes/s
//
//   Link::from(5, 100)   5 us and 100 Gb/s (10^11 bits/s = 12.5e9 bytes/s): 1 MB in 5 + 80 us
//
// Links are full duplex (a rank sends and receives a message at once in the time of one), and
// every rank's link is its own: no congestion, no contention with other jobs.
#pragma once

namespace tessera {
namespace cost {

struct Link {
  double latency = 0;    // alpha, seconds per message
  double bandwidth = 1;  // beta, bytes per second

  // From the units networks are sold in: microseconds and gigabits per second.
  static Link from(double latency_us, double bandwidth_gbps);
  double message_seconds(double bytes) const { return latency + bytes / bandwidth; }
};

}  // namespace cost
}  // namespace tessera
