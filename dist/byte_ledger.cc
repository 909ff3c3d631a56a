#include "dist/byte_ledger.h"

#include <cstdio>

namespace tessera {
namespace dist {

const char* collective_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce: return "all_reduce";
    case CollectiveKind::kReduceScatter: return "reduce_scatter";
    case CollectiveKind::kAllGather: return "all_gather";
    case CollectiveKind::kBroadcast: return "broadcast";
    case CollectiveKind::kSendRecv: return "send";
    case CollectiveKind::kCount: break;
  }
  return "?";
}

void ByteLedger::record(CollectiveKind kind, int64_t bytes_sent) {
  std::lock_guard<std::mutex> lock(mutex_);
  LedgerEntry& e = entries_[static_cast<size_t>(kind)];
  ++e.calls;
  e.bytes += bytes_sent;
}

void ByteLedger::add_bytes(CollectiveKind kind, int64_t bytes_sent) {
  std::lock_guard<std::mutex> lock(mutex_);
  entries_[static_cast<size_t>(kind)].bytes += bytes_sent;
}

void ByteLedger::add_emulated_seconds(CollectiveKind kind, double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  entries_[static_cast<size_t>(kind)].emulated_seconds += seconds;
}

LedgerEntry ByteLedger::entry(CollectiveKind kind) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_[static_cast<size_t>(kind)];
}

int64_t ByteLedger::total_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t total = 0;
  for (const LedgerEntry& e : entries_) total += e.bytes;
  return total;
}

double ByteLedger::emulated_seconds() const {
  std::lock_guard<std::mutex> lock(mutex_);
  double total = 0;
  for (const LedgerEntry& e : entries_) total += e.emulated_seconds;
  return total;
}

void ByteLedger::reset() {
  std::lock_guard<std::mutex> lock(mutex_);
  entries_ = {};
}

std::string ByteLedger::str() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string out;
  for (size_t k = 0; k < entries_.size(); ++k) {
    const LedgerEntry& e = entries_[k];
    if (e.calls == 0) continue;
    char buf[128];
    std::snprintf(buf, sizeof(buf), "%s%s %lld calls %.3f MB", out.empty() ? "" : "; ",
                  collective_name(static_cast<CollectiveKind>(k)), static_cast<long long>(e.calls),
                  e.bytes / 1e6);
    out += buf;
    if (e.emulated_seconds > 0) {
      std::snprintf(buf, sizeof(buf), ", %.3f ms emulated", e.emulated_seconds * 1e3);
      out += buf;
    }
  }
  return out.empty() ? "no communication" : out;
}

}  // namespace dist
}  // namespace tessera
