// ByteLedger: how many bytes this rank sent, per kind of collective.
//
// Every process group records what its collectives put on the wire, so a training step's
// communication volume can be printed and checked against theory: a ring all-reduce of B
// bytes over N ranks sends 2 (N-1)/N B per rank; ZeRO-1 (reduce-scatter + all-gather) sends the
// same; ZeRO-3 1.5 times as much.
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
};

class ByteLedger {
 public:
  void record(CollectiveKind kind, int64_t bytes_sent);  // one call
  void add_bytes(CollectiveKind kind, int64_t bytes_sent);  // more bytes for the current call
  LedgerEntry entry(CollectiveKind kind) const;
  int64_t total_bytes() const;
  void reset();
  // "all_reduce 3 calls 1.20 MB; ..." (kinds with calls only).
  std::string str() const;

 private:
  mutable std::mutex mutex_;
  std::array<LedgerEntry, static_cast<size_t>(CollectiveKind::kCount)> entries_{};
};

}  // namespace dist
}  // namespace tessera
