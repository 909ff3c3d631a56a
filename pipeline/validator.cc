#include "pipeline/validator.h"

#include <algorithm>
#include <cstdio>
#include <deque>
#include <sstream>

#include "tensor/check.h"

namespace tessera {
namespace pipeline {
namespace {

// Where a rank's chunk sits in the whole pipeline: virtual stage c*K + s of V = v*K.
struct Layout {
  int K, M, v;
  int V() const { return K * v; }
  int virtual_stage(int s, int chunk) const { return chunk * K + s; }
  int rank_of(int vs) const { return vs % K; }
  int chunk_of(int vs) const { return vs / K; }
};

std::string where(int s, int index, const Action& a, const Layout& L) {
  return detail::str("stage ", s, ", action #", index, " (", to_string(a, L.v > 1), ")");
}

struct StagePeaks {
  int in_flight = 0, pending_weight = 0;
};

// Per stage: counts and order of every action, and the peaks of held activations and pending W.
StagePeaks check_stage(const std::vector<Action>& list, int s, const Layout& L, bool backward) {
  enum { kF, kB, kSA, kRA, kSG, kRG, kW, kKinds };
  static const char* what[] = {"forward",       "backward",         "activation send",
                               "activation receive", "gradient send", "gradient receive",
                               "weight gradient"};
  // A list that splits its backwards holds an activation until W, and needs a W for every B.
  const bool split = splits_backward(list);
  // seen[kind][chunk][mb]; where each B is, for the error when its W is missing
  std::vector<std::vector<std::vector<int>>> seen(
      kKinds, std::vector<std::vector<int>>(L.v, std::vector<int>(L.M, 0)));
  std::vector<std::vector<int>> b_index(L.v, std::vector<int>(L.M, -1));
  int in_flight = 0, pending = 0;
  StagePeaks peak;
  for (size_t n = 0; n < list.size(); ++n) {
    const Action& a = list[n];
    const int idx = static_cast<int>(n);
    TS_CHECK(a.microbatch >= 0 && a.microbatch < L.M, where(s, idx, a, L), ": micro-batch ",
             a.microbatch, " is not in [0, ", L.M, ")");
    TS_CHECK(a.chunk >= 0 && a.chunk < L.v, where(s, idx, a, L), ": chunk ", a.chunk,
             " is not in [0, ", L.v, ")");
    const int vs = L.virtual_stage(s, a.chunk);
    const bool first = vs == 0, last = vs == L.V() - 1;
    const int k = static_cast<int>(a.kind);
    TS_CHECK(backward || a.kind == ActionKind::kForward || a.kind == ActionKind::kSendActivation ||
                 a.kind == ActionKind::kRecvActivation,
             where(s, idx, a, L), ": a forward-only schedule has no backward pass");
    int& count = seen[k][a.chunk][a.microbatch];
    TS_CHECK(count == 0, where(s, idx, a, L), ": a second ", what[k], " of micro-batch ",
             a.microbatch);
    auto done = [&](int kind) { return seen[kind][a.chunk][a.microbatch] > 0; };
    switch (a.kind) {
      case ActionKind::kRecvActivation:
        TS_CHECK(!first, where(s, idx, a, L), ": the first stage receives no activations");
        break;
      case ActionKind::kSendGradient:
        TS_CHECK(!first, where(s, idx, a, L), ": the first stage sends no gradients");
        TS_CHECK(done(kB), where(s, idx, a, L), ": sends the gradient before the backward");
        break;
      case ActionKind::kSendActivation:
        TS_CHECK(!last, where(s, idx, a, L), ": the last stage sends no activations");
        TS_CHECK(done(kF), where(s, idx, a, L), ": sends the activation before the forward");
        break;
      case ActionKind::kRecvGradient:
        TS_CHECK(!last, where(s, idx, a, L), ": the last stage receives no gradients");
        break;
      case ActionKind::kForward:
        TS_CHECK(first || done(kRA), where(s, idx, a, L),
                 ": forward before its activation was received");
        peak.in_flight = std::max(peak.in_flight, ++in_flight);
        if (!backward) --in_flight;  // evaluation keeps nothing for a backward
        break;
      case ActionKind::kBackward:
        TS_CHECK(done(kF), where(s, idx, a, L), ": backward before the forward");
        TS_CHECK(last || done(kRG), where(s, idx, a, L),
                 ": backward before its output gradient was received");
        b_index[a.chunk][a.microbatch] = idx;
        if (split) {
          peak.pending_weight = std::max(peak.pending_weight, ++pending);
        } else {
          --in_flight;
        }
        break;
      case ActionKind::kWeight:
        TS_CHECK(done(kB), where(s, idx, a, L), ": weight gradient before its backward (",
                 to_string(B(a.microbatch, a.chunk), L.v > 1), ")");
        --in_flight;
        --pending;
        break;
    }
    ++count;
  }
  for (int c = 0; c < L.v; ++c) {
    const int vs = L.virtual_stage(s, c);
    for (int i = 0; i < L.M; ++i) {
      if (split && seen[kB][c][i] == 1 && seen[kW][c][i] == 0) {
        const Action b = B(i, c);
        TS_FAIL(where(s, b_index[c][i], b, L), ": no ", to_string(W(i, c), L.v > 1),
                " follows it: a list with W actions needs one W for every B");
      }
      for (int k = 0; k < kKinds; ++k) {
        const bool gradient_side = k == kB || k == kRG || k == kSG || k == kW;
        const bool needed = (!gradient_side || backward) &&
                            ((k == kF || k == kB) || (k == kW && split) ||
                             ((k == kSA || k == kRG) && vs < L.V() - 1) ||
                             ((k == kRA || k == kSG) && vs > 0));
        TS_CHECK(!needed || seen[k][c][i] == 1, "stage ", s, " never runs the ", what[k],
                 " of micro-batch ", i, L.v > 1 ? detail::str(" on chunk ", c) : "");
      }
    }
  }
  return peak;
}

// The receive that meets `send` (on stage s), and the stage it runs on.
std::pair<int, Action> matching_receive(int s, const Action& send, const Layout& L) {
  const int vs = L.virtual_stage(s, send.chunk);
  const int to = send.kind == ActionKind::kSendActivation ? vs + 1 : vs - 1;
  const ActionKind kind = send.kind == ActionKind::kSendActivation ? ActionKind::kRecvActivation
                                                                   : ActionKind::kRecvGradient;
  return {L.rank_of(to), Action{kind, send.microbatch, L.chunk_of(to)}};
}

// The stage a receive waits on.
int sender_of(int s, const Action& recv, const Layout& L) {
  const int vs = L.virtual_stage(s, recv.chunk);
  return L.rank_of(recv.kind == ActionKind::kRecvActivation ? vs - 1 : vs + 1);
}

std::string deadlock_message(const std::vector<std::vector<Action>>& lists,
                             const std::vector<size_t>& at, const Layout& L) {
  std::ostringstream os;
  os << "deadlock: no stage can move;";
  auto head = [&](int q) {
    return at[q] < lists[q].size() ? to_string(lists[q][at[q]], L.v > 1) : std::string("its end");
  };
  for (int s = 0; s < L.K; ++s) {
    if (at[s] == lists[s].size()) continue;
    const Action& a = lists[s][at[s]];
    os << " stage " << s << " waits at action #" << at[s] << " (" << to_string(a, L.v > 1) << ")";
    const bool send =
        a.kind == ActionKind::kSendActivation || a.kind == ActionKind::kSendGradient;
    const int peer = send ? matching_receive(s, a, L).first : sender_of(s, a, L);
    os << (send ? " to send to stage " : " to receive from stage ") << peer << ", which is at "
       << head(peer) << ";";
  }
  os << " (a cycle of stages each waiting for the next)";
  return os.str();
}

}  // namespace

long StageReport::span() const {
  return timeline.empty() ? 0 : timeline.back().start + 1 - timeline.front().start;
}

double ValidationReport::bubble_theory() const {
  // Split: F, B and W one slot each, 3vM busy slots, and the last stage's K-1 before its first F.
  return split_backward ? static_cast<double>(stages - 1) / (3 * chunks * microbatches + stages - 1)
                        : bubble_fraction(stages, microbatches, chunks);
}

double ValidationReport::bubble_simulated() const {
  double worst = 0;
  for (const StageReport& r : stage) worst = std::max(worst, r.idle_fraction);
  return worst;
}

double ValidationReport::bubble_without_flush() const {
  long period = 0, busy = 0;
  for (const StageReport& r : stage) {
    period = std::max(period, r.span());
    busy = std::max(busy, r.busy_slots);
  }
  return period > 0 ? 1.0 - static_cast<double>(busy) / period : 0;
}

std::string ValidationReport::str() const {
  std::ostringstream os;
  char line[200];
  for (int s = 0; s < stages; ++s) {
    if (split_backward) {
      std::snprintf(line, sizeof(line), "stage %d: peak in flight %d, pending W %d, idle %.3f\n", s,
                    stage[s].peak_in_flight, stage[s].peak_pending_weight, stage[s].idle_fraction);
    } else {
      std::snprintf(line, sizeof(line), "stage %d: peak in flight %d, idle %.3f\n", s,
                    stage[s].peak_in_flight, stage[s].idle_fraction);
    }
    os << line;
  }
  if (split_backward) {
    std::snprintf(line, sizeof(line),
                  "bubble: least with a flush (K-1)/(3vM+K-1) = %d/%d = %.3f, simulated %.3f; "
                  "without a flush %.3f (K=%d M=%d v=%d; F, B, W one slot each)",
                  stages - 1, 3 * chunks * microbatches + stages - 1, bubble_theory(),
                  bubble_simulated(), bubble_without_flush(), stages, microbatches, chunks);
  } else {
    std::snprintf(line, sizeof(line),
                  "bubble: theory (K-1)/(vM+K-1) = %d/%d = %.3f, simulated %.3f (K=%d M=%d v=%d)",
                  stages - 1, chunks * microbatches + stages - 1, bubble_theory(),
                  bubble_simulated(), stages, microbatches, chunks);
  }
  os << line;
  return os.str();
}

Transport transport_for(ScheduleKind kind) {
  return kind == ScheduleKind::kGPipe || kind == ScheduleKind::kOneFOneB ? Transport::kBlocking
                                                                         : Transport::kBuffered;
}

ValidationReport validate(const std::vector<std::vector<Action>>& lists, int microbatches,
                          int chunks, Transport transport, bool backward) {
  const Layout L{static_cast<int>(lists.size()), microbatches, chunks};
  TS_CHECK(L.K >= 1, "validate: no stages");
  TS_CHECK(L.M >= 1, "validate: the number of micro-batches must be at least 1, got ", L.M);
  TS_CHECK(L.v >= 1, "validate: the number of chunks must be at least 1, got ", L.v);
  ValidationReport report;
  report.stages = L.K;
  report.microbatches = L.M;
  report.chunks = L.v;
  report.stage.resize(L.K);
  for (int s = 0; s < L.K; ++s) {
    const StagePeaks peak = check_stage(lists[s], s, L, backward);
    report.stage[s].peak_in_flight = peak.in_flight;
    report.stage[s].peak_pending_weight = peak.pending_weight;
    report.split_backward = report.split_backward || splits_backward(lists[s]);
  }

  // Play the lists. A compute moves its stage's clock one slot. Blocking: a send moves only
  // when its receiver stands at the matching receive, and both clocks jump to the later one.
  // Buffered: a send queues its message on the link (stamped with the sender's clock), a
  // receive takes the oldest one.
  struct Message {
    Action receive;  // the receive it is meant for
    long sent_at;
  };
  // links[from][to][0 activations, 1 gradients]
  std::vector<std::vector<std::vector<std::deque<Message>>>> links(
      L.K, std::vector<std::vector<std::deque<Message>>>(L.K, std::vector<std::deque<Message>>(2)));
  std::vector<size_t> at(L.K, 0);
  std::vector<long> clock(L.K, 0);
  for (bool moved = true; moved;) {
    moved = false;
    for (int s = 0; s < L.K; ++s) {
      while (at[s] < lists[s].size()) {
        const Action& a = lists[s][at[s]];
        if (is_compute(a.kind)) {
          report.stage[s].timeline.push_back({clock[s], a});
          ++clock[s];
          ++report.stage[s].busy_slots;
          ++at[s];
        } else if (a.kind == ActionKind::kSendActivation || a.kind == ActionKind::kSendGradient) {
          const auto [peer, expected] = matching_receive(s, a, L);
          if (transport == Transport::kBuffered) {
            const int link = a.kind == ActionKind::kSendActivation ? 0 : 1;
            links[s][peer][link].push_back({expected, clock[s]});
            ++at[s];
          } else {
            if (peer == s || at[peer] == lists[peer].size() || lists[peer][at[peer]] != expected) {
              break;
            }
            clock[s] = clock[peer] = std::max(clock[s], clock[peer]);
            ++at[s];
            ++at[peer];
          }
        } else if (transport == Transport::kBuffered) {
          const int from = sender_of(s, a, L);
          auto& queue = links[from][s][a.kind == ActionKind::kRecvActivation ? 0 : 1];
          if (queue.empty()) break;
          TS_CHECK(queue.front().receive == a, where(s, static_cast<int>(at[s]), a, L),
                   ": the next message from stage ", from, " on that link is for ",
                   to_string(queue.front().receive, L.v > 1),
                   ": the two ends disagree on the order of their messages");
          clock[s] = std::max(clock[s], queue.front().sent_at);
          queue.pop_front();
          ++at[s];
        } else {
          break;  // a receive waits for its sender to come to it
        }
        moved = true;
      }
    }
  }
  for (int s = 0; s < L.K; ++s) {
    TS_CHECK(at[s] == lists[s].size(), deadlock_message(lists, at, L));
  }
  for (int s = 0; s < L.K; ++s) report.makespan = std::max(report.makespan, clock[s]);
  for (StageReport& r : report.stage) {
    r.idle_fraction = report.makespan > 0 ? 1.0 - static_cast<double>(r.busy_slots) / report.makespan : 0;
  }
  return report;
}

}  // namespace pipeline
}  // namespace tessera
