// ByteLedger: how many bytes this rank sent, per kind of collective.
//
// Every process group records what its collectives put on the wire, so a training step's
// communication volume can be printed and checked against theory: a ring all-reduce of B
// bytes over N ranks sends 2 (N-1)/N B per rank; ZeRO-1 (reduce-scatter + all-gather) sends the
// same; ZeRO-3 1.5 times as much.
//
// Under network emulation (network_emulation.h) it also records, beside the bytes, the model's
// time of the messages this rank sent: the sum of latency + bytes / bandwidth over them (the
// model's, not the measured wait, so it is the same on every run and checkable against theory).
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string>

namespace tessera {
namespace dist {

enum class CollectiveKind { kAllReduce, kReduceScatter, kAllGather, kBroadcast, kSendRecv, kCount };
const char* collective_name(CollectiveKind kind);

struct LedgerEntry {
  int64_t calls = 0;
  int64_t bytes = 0;
  double emulated_seconds = 0;  // 0 unless the group emulates a network
};

class ByteLedger {
 public:
  void record(CollectiveKind kind, int64_t bytes_sent);  // one call
  void add_bytes(CollectiveKind kind, int64_t bytes_sent);  // more bytes for the current call
  // The emulated time of a message sent by the current call.
  void add_emulated_seconds(CollectiveKind kind, double seconds);
  LedgerEntry entry(CollectiveKind kind) const;
  int64_t total_bytes() const;
  double emulated_seconds() const;  // over every kind
  void reset();
  // "all_reduce 3 calls 1.200 MB; ..." (kinds with calls only), with ", 12.500 ms emulated"
  // after a kind's bytes when a network was emulated.
  std::string str() const;

 private:
  mutable std::mutex mutex_;
  std::array<LedgerEntry, static_cast<size_t>(CollectiveKind::kCount)> entries_{};
};

}  // namespace dist
}  // namespace tessera
