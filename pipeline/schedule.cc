#include "pipeline/schedule.h"

#include <algorithm>

#include "pipeline/zero_bubble.h"
#include "tensor/check.h"

namespace tessera {
namespace pipeline {
namespace {

void check_arguments(const char* name, int stages, int microbatches, int stage, int chunks = 1) {
  TS_CHECK(stages >= 1, name, ": the number of stages K must be at least 1, got ", stages);
  TS_CHECK(microbatches >= 1, name, ": the number of micro-batches M must be at least 1, got ",
           microbatches);
  TS_CHECK(stage >= 0 && stage < stages, name, ": stage ", stage, " is not in [0, ", stages, ")");
  TS_CHECK(chunks >= 1, name, ": the number of chunks per rank v must be at least 1, got ",
           chunks);
}

// The helpers below append one micro-batch's step with its messages: a first stage receives
// nothing, a last stage sends nothing forward.
struct Builder {
  int stages, stage;
  std::vector<Action> out;
  bool first() const { return stage == 0; }
  bool last() const { return stage == stages - 1; }
  void recv_activation(int i) { if (!first()) out.push_back(RA(i)); }
  void send_activation(int i) { if (!last()) out.push_back(SA(i)); }
  void recv_gradient(int i) { if (!last()) out.push_back(RG(i)); }
  void send_gradient(int i) { if (!first()) out.push_back(SG(i)); }
  void forward(int i) { recv_activation(i); out.push_back(F(i)); send_activation(i); }
  void backward(int i) { recv_gradient(i); out.push_back(B(i)); send_gradient(i); }
};

// ---- interleaved 1F1B ----

// A computation of the interleaved schedule: forward or backward of micro-batch mb on chunk c.
struct Compute {
  bool forward;
  int mb, chunk;
};

// Megatron-LM's order of computations on rank s (schedules.py,
// forward_backward_pipelining_with_interleaving): the k-th forward runs chunk (k / K) % v on
// micro-batch (k / (K v)) K + k % K; the k-th backward the same micro-batch on the mirrored
// chunk v-1-(k / K) % v.
std::vector<Compute> interleaved_computations(int K, int M, int s, int v) {
  const int total = v * M;
  auto mb_of = [&](int k) { return (k / (K * v)) * K + k % K; };
  auto chunk_of = [&](int k, bool forward) {
    const int c = (k % (K * v)) / K;
    return forward ? c : v - 1 - c;
  };
  const int warmup = M == K ? total : std::min((K - s - 1) * 2 + (v - 1) * K, total);
  std::vector<Compute> out;
  for (int k = 0; k < warmup; ++k) out.push_back({true, mb_of(k), chunk_of(k, true)});
  for (int k = 0; k < total - warmup; ++k) {
    out.push_back({true, mb_of(warmup + k), chunk_of(warmup + k, true)});
    out.push_back({false, mb_of(k), chunk_of(k, false)});
  }
  for (int k = total - warmup; k < total; ++k) out.push_back({false, mb_of(k), chunk_of(k, false)});
  return out;
}

// The computations with their messages: receive right before the computation that needs the
// message, send right after the one that produces it. Virtual stage vs = c K + s receives
// activations from vs-1 and gradients from vs+1; the first and last virtual stages have no
// neighbour on that side.
std::vector<Action> interleaved_actions(int K, int M, int s, int v) {
  const int V = K * v;
  std::vector<Action> out;
  for (const Compute& c : interleaved_computations(K, M, s, v)) {
    const int vs = c.chunk * K + s;
    if (c.forward) {
      if (vs > 0) out.push_back(RA(c.mb, c.chunk));
      out.push_back(F(c.mb, c.chunk));
      if (vs < V - 1) out.push_back(SA(c.mb, c.chunk));
    } else {
      if (vs < V - 1) out.push_back(RG(c.mb, c.chunk));
      out.push_back(B(c.mb, c.chunk));
      if (vs > 0) out.push_back(SG(c.mb, c.chunk));
    }
  }
  return out;
}

void check_interleaved(int K, int M, int v) {
  TS_CHECK(K >= 2, "interleaved_1f1b: needs at least 2 stages (chunks travel from rank to rank), got K = ",
           K);
  TS_CHECK(M % K == 0, "interleaved_1f1b: the number of micro-batches M = ", M,
           " must be a multiple of the number of stages K = ", K,
           " (forwards go in groups of K micro-batches per chunk)");
}

}  // namespace

bool is_compute(ActionKind kind) {
  return kind == ActionKind::kForward || kind == ActionKind::kBackward ||
         kind == ActionKind::kWeight;
}

bool splits_backward(const std::vector<Action>& actions) {
  return std::any_of(actions.begin(), actions.end(),
                     [](const Action& a) { return a.kind == ActionKind::kWeight; });
}

std::string to_string(const Action& a, bool show_chunk) {
  static const char* names[] = {"F", "B", "SA", "RA", "SG", "RG", "W"};
  std::string s = names[static_cast<int>(a.kind)] + std::to_string(a.microbatch);
  if (show_chunk) s += "." + std::to_string(a.chunk);
  return s;
}

std::string to_string(const std::vector<Action>& actions, bool show_chunk) {
  std::string s;
  for (const Action& a : actions) s += (s.empty() ? "" : " ") + to_string(a, show_chunk);
  return s;
}

ScheduleKind parse_schedule(const std::string& name) {
  if (name == "gpipe") return ScheduleKind::kGPipe;
  if (name == "1f1b") return ScheduleKind::kOneFOneB;
  if (name == "interleaved") return ScheduleKind::kInterleaved;
  if (name == "zb-h1") return ScheduleKind::kZBH1;
  if (name == "zb-h2") return ScheduleKind::kZBH2;
  TS_FAIL("pipeline schedule '", name, "' is not one of gpipe, 1f1b, interleaved, zb-h1, zb-h2");
}

const char* schedule_name(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::kGPipe: return "gpipe";
    case ScheduleKind::kOneFOneB: return "1f1b";
    case ScheduleKind::kInterleaved: return "interleaved";
    case ScheduleKind::kZBH1: return "zb-h1";
    case ScheduleKind::kZBH2: return "zb-h2";
  }
  return "?";
}

std::vector<Action> gpipe(int stages, int microbatches, int stage) {
  check_arguments("gpipe", stages, microbatches, stage);
  Builder b{stages, stage, {}};
  for (int i = 0; i < microbatches; ++i) b.forward(i);
  for (int i = 0; i < microbatches; ++i) b.backward(i);
  return b.out;
}

std::vector<Action> one_f_one_b(int stages, int microbatches, int stage) {
  check_arguments("one_f_one_b", stages, microbatches, stage);
  const int M = microbatches;
  const int warmup = std::min(stages - stage - 1, M);
  const int steady = M - warmup;
  Builder b{stages, stage, {}};
  for (int i = 0; i < warmup; ++i) b.forward(i);
  for (int k = 0; k < steady; ++k) {
    // Forward warmup + k, backward k; the gradient is received before the activation is sent
    // (see the header: the next stage sends its gradient before receiving the activation).
    const int i = warmup + k;
    b.recv_activation(i);
    b.out.push_back(F(i));
    b.recv_gradient(k);
    b.send_activation(i);
    b.out.push_back(B(k));
    b.send_gradient(k);
  }
  for (int k = steady; k < M; ++k) b.backward(k);
  return b.out;
}

std::vector<Action> interleaved_1f1b(int stages, int microbatches, int stage, int chunks) {
  check_arguments("interleaved_1f1b", stages, microbatches, stage, chunks);
  check_interleaved(stages, microbatches, chunks);
  return interleaved_actions(stages, microbatches, stage, chunks);
}

std::vector<Action> forward_only(int stages, int microbatches, int stage, int chunks) {
  check_arguments("forward_only", stages, microbatches, stage, chunks);
  if (chunks > 1) check_interleaved(stages, microbatches, chunks);
  const int V = stages * chunks;
  std::vector<Action> out;
  for (const Compute& c : interleaved_computations(stages, microbatches, stage, chunks)) {
    if (!c.forward) continue;
    const int vs = c.chunk * stages + stage;
    if (vs > 0) out.push_back(RA(c.mb, c.chunk));
    out.push_back(F(c.mb, c.chunk));
    if (vs < V - 1) out.push_back(SA(c.mb, c.chunk));
  }
  return out;
}

std::vector<Action> make_schedule(ScheduleKind kind, int stages, int microbatches, int stage,
                                  int chunks) {
  TS_CHECK(kind == ScheduleKind::kInterleaved || chunks == 1, "pipeline schedule ",
           schedule_name(kind), " runs one chunk per rank, got chunks = ", chunks);
  switch (kind) {
    case ScheduleKind::kGPipe: return gpipe(stages, microbatches, stage);
    case ScheduleKind::kOneFOneB: return one_f_one_b(stages, microbatches, stage);
    case ScheduleKind::kInterleaved: return interleaved_1f1b(stages, microbatches, stage, chunks);
    case ScheduleKind::kZBH1: return zb_h1(stages, microbatches, stage);
    case ScheduleKind::kZBH2: return zb_h2(stages, microbatches, stage);
  }
  return {};
}

std::vector<std::vector<Action>> make_schedules(ScheduleKind kind, int stages, int microbatches,
                                                int chunks) {
  std::vector<std::vector<Action>> out;
  for (int s = 0; s < stages; ++s) out.push_back(make_schedule(kind, stages, microbatches, s, chunks));
  return out;
}

std::vector<Action> eager_sends(const std::vector<Action>& actions) {
  std::vector<Action> out;
  for (const Action& a : actions) {
    const bool send = a.kind == ActionKind::kSendActivation || a.kind == ActionKind::kSendGradient;
    if (!send) {
      out.push_back(a);
      continue;
    }
    const ActionKind producer =
        a.kind == ActionKind::kSendActivation ? ActionKind::kForward : ActionKind::kBackward;
    // Back past every action after the producer, but never past an earlier send (each link
    // keeps its order).
    size_t at = out.size();
    while (at > 0) {
      const Action& before = out[at - 1];
      if ((before.kind == producer && before.microbatch == a.microbatch && before.chunk == a.chunk) ||
          before.kind == ActionKind::kSendActivation || before.kind == ActionKind::kSendGradient) {
        break;
      }
      --at;
    }
    out.insert(out.begin() + static_cast<std::ptrdiff_t>(at), a);
  }
  return out;
}

double bubble_fraction(int stages, int microbatches, int chunks) {
  return static_cast<double>(stages - 1) / (chunks * microbatches + stages - 1);
}

}  // namespace pipeline
}  // namespace tessera
